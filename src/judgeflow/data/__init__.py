"""Judge data: read OpenJudge / RewardBench2 rows, validate, render prompts, write verl parquet.

The public API is re-exported here; the work lives in the private-by-convention modules
(`readers`, `prepare`, `templates`, ...). Nothing here imports mlflow, ray or prefect.
"""

from judgeflow.data.duplicates import PromptUnits, prompt_duplicates
from judgeflow.data.errors import (
    DataError,
    DataFileNotFoundError,
    DataValidationError,
    Hint,
    OutputWriteError,
    RowIssue,
)
from judgeflow.data.examples import (
    Example,
    Origin,
    PairwiseExample,
    PointwiseExample,
    Preference,
)
from judgeflow.data.grrm import (
    GrrmPrepareResult,
    augmentation_plan,
    grrm_prompt_units,
    grrm_sft_example,
    prepare_grrm_rl,
    prepare_grrm_sft,
)
from judgeflow.data.grrm_template import (
    GRRM_PROMPT_HEAD,
    LANG_NAMES,
    ground_truth_json,
    render_grrm_prompt,
    render_grrm_target,
)
from judgeflow.data.io import atomic_write_bytes, atomic_write_text, sha256_file
from judgeflow.data.prepare import (
    PrepareResult,
    judge_prompt_units,
    output_paths,
    prepare_judge,
)
from judgeflow.data.prompt_tokens import prompt_lengths
from judgeflow.data.readers import (
    DroppedRow,
    InputFormat,
    ReadResult,
    SourceFormat,
    detect_format,
    iter_records,
    read_examples,
)
from judgeflow.data.shards import (
    GrrmShard,
    GrrmShardPlan,
    GrrmShardResult,
    merge_grrm_rl_shards,
    plan_grrm_rl_shards,
    prepare_grrm_rl_shard,
    prepare_grrm_rl_sharded,
)
from judgeflow.data.templates import (
    PAIRWISE_TEMPLATE,
    POINTWISE_TEMPLATE,
    render_pairwise,
    render_pointwise,
)
from judgeflow.data.verl_rows import render_messages, to_verl_row

__all__ = [
    "GRRM_PROMPT_HEAD",
    "LANG_NAMES",
    "PAIRWISE_TEMPLATE",
    "POINTWISE_TEMPLATE",
    "DataError",
    "DataFileNotFoundError",
    "DataValidationError",
    "DroppedRow",
    "Example",
    "GrrmPrepareResult",
    "GrrmShard",
    "GrrmShardPlan",
    "GrrmShardResult",
    "Hint",
    "InputFormat",
    "Origin",
    "OutputWriteError",
    "PairwiseExample",
    "PointwiseExample",
    "Preference",
    "PrepareResult",
    "PromptUnits",
    "ReadResult",
    "RowIssue",
    "SourceFormat",
    "atomic_write_bytes",
    "atomic_write_text",
    "augmentation_plan",
    "detect_format",
    "ground_truth_json",
    "grrm_prompt_units",
    "grrm_sft_example",
    "iter_records",
    "judge_prompt_units",
    "merge_grrm_rl_shards",
    "output_paths",
    "plan_grrm_rl_shards",
    "prepare_grrm_rl",
    "prepare_grrm_rl_shard",
    "prepare_grrm_rl_sharded",
    "prepare_grrm_sft",
    "prepare_judge",
    "prompt_duplicates",
    "prompt_lengths",
    "read_examples",
    "render_grrm_prompt",
    "render_grrm_target",
    "render_messages",
    "render_pairwise",
    "render_pointwise",
    "sha256_file",
    "to_verl_row",
]
