"""What a training script or config asks of the machine, read from what the scan's readers found:
the models it loads (name or path, attention implementation, dtype, 4/8-bit), the precision it
trains in, and where. Pure functions of the parsed file; judged in ``against_gpu`` and
``diagnosis``.

Only literals count: ``bf16=True`` is a site, ``bf16=is_bfloat16_supported()`` is not (its value
is decided when the script runs), and a model named through ``args.model`` is a load whose
reference is unresolved, which the judgement says instead of guessing."""

from __future__ import annotations

from dataclasses import dataclass

from .configs import ConfigFile, key_values
from .python_file import CallSite, KeywordSite, PythonFile, matches

# Model loaders whose first argument (or model_name=) names a model; tokenizers, processors and
# configs load the same files but decide nothing about attention or memory.
MODEL_LOADERS = ("transformers.AutoModel*.from_pretrained", "transformers.*ForCausalLM.from_pretrained",
                 "transformers.*ForConditionalGeneration.from_pretrained", "transformers.*ForSeq2SeqLM.from_pretrained",
                 "transformers.*ForSequenceClassification.from_pretrained", "transformers.*Model.from_pretrained",
                 "unsloth.FastLanguageModel.from_pretrained", "unsloth.FastModel.from_pretrained",
                 "unsloth.FastVisionModel.from_pretrained")
QUANTIZATION_CONFIG = "transformers.BitsAndBytesConfig"
_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "half": "float16", "fp16": "float16",
           "float32": "float32", "float": "float32", "auto": "auto"}


@dataclass(frozen=True)
class Site:
    """A place in a scanned file: the path read, the path as the report shows it, and the line."""

    file: str  # the path read
    shown: str  # the path as the report shows it (relative to the scanned directory)
    line: int

    @property
    def where(self) -> str:
        return f"{self.shown}:{self.line}"


@dataclass(frozen=True)
class ModelLoad:
    """A model the code or config loads: the loader, the model's id or path (or why it is not known), and what
    the load asks for (attention implementation, dtype, 4/8-bit, cache_dir), each with where it is written."""

    site: Site
    loader: str  # "transformers.AutoModelForCausalLM.from_pretrained", "LLaMA-Factory config", ...
    reference: str  # the model id or path; "" when the code does not name it with a literal
    unresolved: str = ""  # why reference is ""
    attn_implementation: str = ""
    attn_site: Site | None = None
    dtype: str = ""  # bfloat16 | float16 | float32 | auto | "" (not given, or not a literal)
    dtype_site: Site | None = None
    bits: int = 0  # 4 or 8 when it loads through bitsandbytes, else 0
    bits_site: Site | None = None
    cache_dir: str = ""
    attn_keyword: str = "attn_implementation"  # or use_flash_attention_2 (transformers < 4.36's spelling)

    @property
    def library(self) -> str:
        return self.loader.split(".", 1)[0]


@dataclass(frozen=True)
class Precision:
    """A half precision (bf16 or fp16) a script or config asks for, through a training argument or a model
    load's dtype: where, and how it is written."""

    site: Site
    mode: str  # "bf16" | "fp16"
    how: str  # "TrainingArguments(bf16=True)", "torch_dtype=torch.bfloat16", "bf16: true"
    name: str = ""  # the keyword or key, for the edit
    call: str = ""  # the call it is passed to ("" in a config)


@dataclass(frozen=True)
class Quantization:
    """A 4- or 8-bit bitsandbytes load a script or config asks for: where, how it is written, and the
    library that loads it."""

    site: Site
    bits: int
    how: str  # "BitsAndBytesConfig(load_in_4bit=True)", "quantization_bit: 4"
    loader: str  # the library that loads it: transformers | unsloth | LLaMA-Factory | axolotl


def dtype_of(keyword: KeywordSite | None) -> str:
    if keyword is None:
        return ""
    text = keyword.value if keyword.literal and isinstance(keyword.value, str) else keyword.expr
    return _DTYPES.get(str(text).rsplit(".", 1)[-1], "") if text else ""


def _reference(call: CallSite, source: PythonFile) -> tuple[str, str]:
    """(reference, why unresolved)."""
    given = call.keyword("pretrained_model_name_or_path") or call.keyword("model_name") or (
        call.positional[0] if call.positional else None)
    if given is None:
        return "", "the model is not passed by name (a config object or **kwargs)"
    if given.literal:
        return (given.value, "") if isinstance(given.value, str) else ("", "the model name is not a string")
    if given.expr and given.expr in source.strings:
        return source.strings[given.expr], ""
    if given.expr:
        return "", f"the model comes from `{given.expr}`, which is not one string literal in this file"
    return "", "the model name is computed at run time"


def _literal_true(call: CallSite, name: str) -> KeywordSite | None:
    keyword = call.keyword(name)
    return keyword if keyword is not None and keyword.literal and keyword.value is True else None


def python_loads(source: PythonFile, shown: str) -> list[ModelLoad]:
    loads = []
    for call in source.calls:
        if not call.qualified.endswith(".from_pretrained") or not any(matches(call.qualified, p) for p in MODEL_LOADERS):
            continue
        reference, why = _reference(call, source)
        attn = call.keyword("attn_implementation")
        if attn is None and _literal_true(call, "use_flash_attention_2") is not None:
            # the keyword transformers 4.34-4.35 took before attn_implementation (deprecated in 4.36)
            attn = KeywordSite("use_flash_attention_2", call.keyword("use_flash_attention_2").line, 0, "flash_attention_2")
        dtype_kw = call.keyword("torch_dtype") or call.keyword("dtype")
        bits, bits_kw = 0, None
        for size in (4, 8):
            found = _literal_true(call, f"load_in_{size}bit")
            if found is not None:
                bits, bits_kw = size, found
        config = call.keyword("quantization_config")
        if not bits and config is not None and config.expr and matches(config.expr, QUANTIZATION_CONFIG):
            bits, bits_kw = _inline_bnb_bits(source, config.line)
        cache = call.keyword("cache_dir")
        loads.append(ModelLoad(
            Site(source.path, shown, call.line), call.qualified, reference, why,
            attn.value if attn is not None and attn.literal and isinstance(attn.value, str) else "",
            Site(source.path, shown, attn.line) if attn is not None else None,
            dtype_of(dtype_kw), Site(source.path, shown, dtype_kw.line) if dtype_kw is not None else None,
            bits, Site(source.path, shown, bits_kw.line) if bits_kw is not None else None,
            cache.value if cache is not None and cache.literal and isinstance(cache.value, str) else "",
            attn.name if attn is not None else "attn_implementation"))
    return loads


def _inline_bnb_bits(source: PythonFile, line: int) -> tuple[int, KeywordSite | None]:
    """``quantization_config=BitsAndBytesConfig(load_in_4bit=True)`` written inline: the nested
    call is a call site of its own, starting on the keyword's line."""
    for call in source.calls:
        if call.line == line and matches(call.qualified, QUANTIZATION_CONFIG):
            for size in (4, 8):
                found = _literal_true(call, f"load_in_{size}bit")
                if found is not None:
                    return size, found
    return 0, None


def python_quantization(source: PythonFile, shown: str) -> list[Quantization]:
    """Every 4/8-bit bitsandbytes load the file asks for: BitsAndBytesConfig(load_in_4bit=True)
    anywhere (assigned to a variable first, as most QLoRA scripts do) and load_in_4bit=True passed
    to a loader."""
    found = []
    for call in source.calls:
        is_config = call.qualified.endswith(".BitsAndBytesConfig") and matches(call.qualified, QUANTIZATION_CONFIG)
        if not (is_config or (call.qualified.endswith(".from_pretrained")
                              and any(matches(call.qualified, p) for p in MODEL_LOADERS))):
            continue
        for size in (4, 8):
            keyword = _literal_true(call, f"load_in_{size}bit")
            if keyword is not None:
                name = call.qualified.rsplit(".", 1 if is_config else 2)[-1 if is_config else 0]
                found.append(Quantization(Site(source.path, shown, keyword.line), size,
                                          f"{name}(load_in_{size}bit=True)", call.qualified.split(".", 1)[0]))
    return found


def python_precision(source: PythonFile, shown: str, training_arguments: tuple[str, ...]) -> list[Precision]:
    found = []
    names = {p.rsplit(".", 1)[-1] for p in training_arguments}
    for call in source.calls:
        if call.qualified.rsplit(".", 1)[-1] in names and any(matches(call.qualified, p) for p in training_arguments):
            name = call.qualified.rsplit(".", 1)[-1]
            for mode in ("bf16", "fp16"):
                keyword = _literal_true(call, mode)
                if keyword is not None:
                    found.append(Precision(Site(source.path, shown, keyword.line), mode, f"{name}({mode}=True)",
                                           mode, call.qualified))
    for load in python_loads(source, shown):
        if load.dtype in ("bfloat16", "float16") and load.dtype_site is not None:
            mode = "bf16" if load.dtype == "bfloat16" else "fp16"
            found.append(Precision(load.dtype_site, mode, f"{load.loader.rsplit('.', 2)[-2]}.from_pretrained("
                                                           f"dtype {load.dtype})", "", load.loader))
    return found


# -- configs ---------------------------------------------------------------------------------


def config_loads(config: ConfigFile, shown: str, dialect: str) -> list[ModelLoad]:
    values = key_values(config)
    key = {"llamafactory": "model_name_or_path", "axolotl": "base_model", "hf": "model_name_or_path"}[dialect]
    if key not in values or not isinstance(values[key][0], str):
        return []
    reference, line = values[key]
    attn, attn_site = "", None
    if dialect == "llamafactory" and "flash_attn" in values:
        value, at = values["flash_attn"]
        attn = "flash_attention_2" if value in ("fa2", True) else str(value)
        attn_site = Site(config.path, shown, at)
    if dialect == "axolotl" and "flash_attention" in values:
        value, at = values["flash_attention"]
        attn = "flash_attention_2" if value is True else ""
        attn_site = Site(config.path, shown, at)
    quantization = config_quantization(config, shown, dialect)
    return [ModelLoad(Site(config.path, shown, line), {"llamafactory": "LLaMA-Factory config", "axolotl": "axolotl config",
                                                      "hf": "config"}[dialect],
                      reference, "", attn, attn_site, "", None,
                      quantization[0].bits if quantization else 0, quantization[0].site if quantization else None)]


def config_quantization(config: ConfigFile, shown: str, dialect: str) -> list[Quantization]:
    values = key_values(config)
    found = []
    if dialect == "llamafactory" and values.get("quantization_bit", (None,))[0] in (4, 8):
        method = values.get("quantization_method", ("bnb",))[0]  # LLaMA-Factory's default is bitsandbytes
        if str(method).lower() in ("bnb", "bitsandbytes"):
            bits, line = values["quantization_bit"]
            found.append(Quantization(Site(config.path, shown, line), bits, f"quantization_bit: {bits}", "LLaMA-Factory"))
    if dialect == "axolotl":
        for size in (4, 8):
            if values.get(f"load_in_{size}bit", (None,))[0] is True:
                found.append(Quantization(Site(config.path, shown, values[f"load_in_{size}bit"][1]), size,
                                          f"load_in_{size}bit: true", "axolotl"))
    return found


def config_precision(config: ConfigFile, shown: str) -> list[Precision]:
    values = key_values(config)
    return [Precision(Site(config.path, shown, values[mode][1]), mode, f"{mode}: true", mode)
            for mode in ("bf16", "fp16") if values.get(mode, (None,))[0] is True]
