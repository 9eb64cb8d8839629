"""Loading a run's configuration: a recipe preset (YAML, `base:` chains), an optional profile
overlay, then `dotted.key=value` overrides, validated last so every error names its key; keys the
run would ignore and secret-looking overrides are warned about as it loads.

Only `${NAME}` is expanded in values: a `$` in a prompt, URL or password is kept as written, and
an unset NAME fails naming the key, the file (or `--set`) it came from and the variable."""

from __future__ import annotations

import copy
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from judgeflow.config.errors import ConfigError, IgnoredKeyWarning, SecretParameterWarning
from judgeflow.config.inputs import DATA_URL_KEYS
from judgeflow.config.keys import JUDGE_URL_KEYS, ignored_keys, secret_overrides
from judgeflow.config.redaction import has_url_credentials, is_secret
from judgeflow.config.run_config import RunConfig, validate_config
from judgeflow.config.safe_yaml import UnsafeYaml, load_yaml, load_yaml_file
from judgeflow.home import judgeflow_home

RECIPES_DIR = Path(__file__).parents[1] / "recipes"


PROFILES_DIR = RECIPES_DIR / "profiles"


def list_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def list_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def load_config(
    recipe: str | Path,
    *,
    profile: str | None = None,
    overrides: Iterable[str] = (),
    report: Callable[[str], None] | None = None,
) -> RunConfig:
    """Preset (name or YAML path) + optional profile + `key=value` overrides -> validated config.

    A key the user set that this run's engine or backend does not read is reported by name
    (`report`, e.g. a logger's warning; default: an :class:`IgnoredKeyWarning`).
    """
    raw, sources = _read_recipe(_recipe_path(recipe))
    own_profiles = raw.pop("profiles", None) or {}
    if profile:
        # the shared profile first, then what this recipe says for it (`profiles: {tiny: …}`)
        values, profile_sources = _read_profile(profile)
        where = _source_of("recipes", profile_sources)
        meant_for = profile_recipes(values.pop("recipes", None), where)
        if meant_for is not None and raw.get("recipe") not in meant_for:
            raise ConfigError(
                f"{where}: profile {profile!r} is for recipe(s) {', '.join(meant_for)} only, "
                f"not {raw.get('recipe')!r}: use --profile tiny for other recipes, or one of: "
                f"{', '.join(meant_for)} with --profile {profile}"
            )
        raw = _layer(raw, values)
        sources.update(profile_sources)
        raw = _layer(raw, own_profiles.get(profile) or {})
        section = f"profiles.{profile}."
        sources.update(
            {k.removeprefix(section): f for k, f in sources.items() if k.startswith(section)}
        )
    # What the user chose (overrides, or a recipe file of their own) is checked for keys this run
    # would ignore; the shipped presets set keys for both engines on purpose.
    path = _recipe_path(recipe)
    own = {} if path.parent == RECIPES_DIR else _read_yaml(path)
    explicit = [k for k in _dotted_keys(own) if k.split(".")[0] not in ("base", "profiles")]
    secret_looking = []
    for item in overrides:
        key, value = parse_override(item)
        raw = _cleared_alternatives(set_dotted(raw, key, value), set_dotted({}, key, value))
        sources.update({key: "--set", **_sources(value, "--set", f"{key}.")})
        explicit.append(key)
        if (key.startswith("cluster.env.") and is_secret(key, value)) or (
            key in ("tracking.tracking_uri", *DATA_URL_KEYS, *JUDGE_URL_KEYS)
            and has_url_credentials(str(value))
        ):
            secret_looking.append((key, value))  # an override is a flow parameter: said below
    raw = _expand(
        raw,
        {"JUDGEFLOW_HOME": str(judgeflow_home()), "mode": str(raw.get("mode"))},
        sources,
    )
    cfg = validate_config(raw)
    for reason, kind in [(r, SecretParameterWarning) for r in secret_overrides(secret_looking)] + [
        (r, IgnoredKeyWarning) for r in ignored_keys(cfg, dict.fromkeys(explicit))
    ]:
        if report is None:
            warnings.warn(reason, kind, stacklevel=2)
        else:
            report(reason)
    return cfg


def _dotted_keys(raw: Mapping[str, Any], prefix: str = "") -> Iterable[str]:
    for key, value in raw.items():
        if isinstance(value, Mapping) and value:
            yield from _dotted_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def parse_override(item: str) -> tuple[str, Any]:
    """`grpo.learning_rate=1e-5` -> ("grpo.learning_rate", 1e-5); values are parsed as YAML."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)*", key):
        raise ConfigError(f"override {item!r} is not of the form dotted.key=value")
    try:
        value = load_yaml(text) if text.strip() else ""
    except UnsafeYaml as exc:
        raise ConfigError(f"override {key}: {exc}") from None
    except yaml.YAMLError:
        value = text
    return key, value


def set_dotted(raw: Mapping[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of `raw` with `key` (dotted) set to `value`, creating sections as needed."""
    out = copy.deepcopy(dict(raw))
    node = out
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {key!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value
    return out


def _recipe_path(recipe: str | Path) -> Path:
    path = Path(recipe)
    if path.suffix in {".yaml", ".yml"}:
        if not path.is_file():
            raise ConfigError(f"recipe file {path} does not exist")
        return path
    candidate = RECIPES_DIR / f"{recipe}.yaml"
    if not candidate.is_file():
        raise ConfigError(f"unknown recipe {str(recipe)!r}; available: {', '.join(list_recipes())}")
    return candidate


def _read_recipe(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict[str, Any], Sources]:
    """A recipe may start from another (`base: grrm-rlvr`) and override some of its keys."""
    raw = _read_yaml(path)
    base = raw.pop("base", None)
    if base is None:
        return raw, _sources(raw, str(path))
    base_path = _recipe_path(str(base))
    if base_path in seen or base_path == path:
        raise ConfigError(f"{path}: recipe base chain loops through {base_path.name}")
    under, sources = _read_recipe(base_path, (*seen, path))
    return _layer(under, raw), {**sources, **_sources(raw, str(path))}


def _read_profile(profile: str, seen: tuple[str, ...] = ()) -> tuple[dict[str, Any], Sources]:
    """A shared profile may start from another (`base: tiny`), as a recipe may, and may say
    which recipes it is for (`recipes: [grpo-pointwise]`; others are refused by name)."""
    path = _profile_path(profile)
    raw = _read_yaml(path)
    base = raw.pop("base", None)
    if base is None:
        return raw, _sources(raw, str(path))
    if str(base) in (*seen, profile):
        raise ConfigError(f"{path}: profile base chain loops through {base}")
    under, sources = _read_profile(str(base), (*seen, profile))
    return _layer(under, raw), {**sources, **_sources(raw, str(path))}


def profile_recipes(value: Any, where: str) -> list[str] | None:
    """The recipes a shared profile is for (its `recipes:`, written in the file `where`); None:
    every recipe. Anything but a list of recipe names is refused, naming the file."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(name, str) and name.strip() for name in value)
    ):
        raise ConfigError(
            f"{where}: recipes: must be a list of recipe names, e.g. [grpo-pointwise], not "
            f"{value!r}; leave it out for a profile every recipe may use"
        )
    return value


def _profile_path(profile: str) -> Path:
    candidate = PROFILES_DIR / f"{profile}.yaml"
    if not candidate.is_file():
        raise ConfigError(
            f"unknown profile {profile!r}; available: {', '.join(list_profiles()) or 'none'}"
        )
    return candidate


def _read_yaml(path: Path) -> dict[str, Any]:
    """A recipe or profile file as plain data; a hostile one is refused before it is built
    (`safe_yaml`), reading no more of it than the size limit needs."""
    try:
        data = load_yaml_file(path) or {}
    except UnsafeYaml as exc:
        raise ConfigError(f"{path}: refused: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


#: Keys that say the same thing two ways (one source, or a mixture of them): a layer (a recipe
#: over its base, a profile, an override) that sets one clears the other, as it would replace it.
_ALTERNATIVES = (("source", "mixer"), ("val_source", "eval_mixer"))


def _layer(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base` (`_deep_merge`), a `data` key of `top` clearing its alternative."""
    return _cleared_alternatives(_deep_merge(base, top), top)


def _cleared_alternatives(out: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`out` with the alternative of each `data` key `top` sets (and not its own) cleared."""
    given, data = top.get("data"), out.get("data")
    if isinstance(given, Mapping) and isinstance(data, dict):
        for pair in _ALTERNATIVES:
            for key, other in (pair, pair[::-1]):
                if given.get(key) is not None and other not in given:
                    data[other] = None
    return out


def _deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top`'s mappings merged into `base`'s key by key; an empty one (`remap_verifier: {}`)
    replaces `base`'s, so that a layer can clear a preset's mapping."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and value and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


#: `${NAME}`, the one form expanded in values; any other `$` (`pa$$word`, `$HOME`) is kept.
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: Where each value was written, by dotted key: its recipe or profile file, or `--set`.
Sources = dict[str, str]


def _sources(raw: Any, where: str, prefix: str = "") -> Sources:
    if not isinstance(raw, Mapping):
        return {}
    return {f"{prefix}{key}": where for key in _dotted_keys(raw)}


def _source_of(key: str, sources: Sources) -> str:
    """The file (or `--set`) that wrote `key`, or the section or list that holds it."""
    while key not in sources and (shorter := re.sub(r"(\.[^.\[]*|\[\d+\])$", "", key)) != key:
        key = shorter
    return sources.get(key, "the recipe")


def _expand(value: Any, known: Mapping[str, str], sources: Sources, key: str = "") -> Any:
    """Substitute `${NAME}` in strings: `known` names (JUDGEFLOW_HOME, mode), then environment
    variables; an unset one fails, naming the key, where it was written and the variable, rather
    than leave a `${…}` where a path, URL or password was meant."""
    if isinstance(value, dict):
        return {
            k: _expand(v, known, sources, f"{key}.{k}" if key else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_expand(v, known, sources, f"{key}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def substitute(reference: re.Match[str]) -> str:
        name = reference.group(1)
        if name in known:
            return known[name]
        if name in os.environ:
            return os.environ[name]
        raise ConfigError(
            f"{key}, from {_source_of(key, sources)}: ${{{name}}} names the environment "
            f"variable {name}, which is not set; set it, or write the value itself"
        )

    return _REFERENCE.sub(substitute, value)
