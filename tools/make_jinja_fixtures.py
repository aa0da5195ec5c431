#!/usr/bin/env python3
"""make_jinja_fixtures.py: reference renderings for the C Jinja engine (jinja/), made by jinja2 inside
transformers' own chat-template environment.

Writes into tests/fixtures/jinja/:
  cases.json      unit cases of Jinja semantics (tools/jinja_fixture_cases.py: GROUPS), each rendered
                  by the template that transformers.utils.chat_template_utils._compile_jinja_template
                  builds (its ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
                  loopcontrols, the {% generation %} tracker, tojson, raise_exception, strftime_now,
                  dict and namespace): the output, or the exception's class and message
  templates.json  the released chat templates in ../shared/templates (named by path and sha256, never
                  copied) applied to conversations through tokenizer.apply_chat_template(tokenize=False)
                  (so transformers' message normalisation and special-token kwargs are the real ones),
                  with the {% generation %} spans from render_jinja_template(return_assistant_tokens_mask)
strftime_now is frozen at 2026-01-02 03:04:05 (naive local time): the module global `datetime` of
transformers.utils.chat_template_utils is replaced by a subclass whose now() returns that instant.

Run from the repository root:
    /work/pyref/bin/python tools/make_jinja_fixtures.py
Options: --templates DIR (default ../shared/templates), --tokenizer DIR (default
tests/fixtures/tokenizer: the MiniMax-Text-01 special tokens), --out-dir DIR.
The versions below are pinned: other versions are refused unless --any-version is given.
"""
import argparse
import copy
import datetime as _dt
import hashlib
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jinja_fixture_cases as data  # noqa: E402

PINNED = {"transformers": "5.24.0", "tokenizers": "0.23.3", "jinja2": "3.1.6"}
FROZEN_NOW = (2026, 1, 2, 3, 4, 5)
MINIMAX = ["MiniMax-Text-01.jinja", "MiniMax-M1.jinja", "MiniMax-M2.jinja", "MiniMax-M3.jinja"]
TEXT01_TOKENIZER = ("MiniMax-Text-01.jinja", "MiniMax-M1.jinja")

NORMALISATION = [
    "tokenization_utils_base.PreTrainedTokenizerBase.apply_chat_template (transformers 5.24.0), in order:",
    "1. an empty conversation raises ValueError('Cannot apply chat template to an empty conversation. "
    "Provide at least one message.') before anything is rendered;",
    "2. chat_template_utils._normalize_chat_messages: message objects (dataclasses, pydantic) become dicts, "
    "then every TOP-LEVEL key of a message whose value is None is dropped ({'content': None} -> no 'content' "
    "key). Nested None values (tool-call arguments, content parts) are kept;",
    "3. template kwargs = {**tokenizer.special_tokens_map, **kwargs}: the named special tokens that are set "
    "(bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token; v5 no longer passes "
    "additional_special_tokens) as strings, overridden by caller kwargs of the same name;",
    "4. chat_template_utils.render_jinja_template: tools (dicts kept, callables turned into JSON schemas), "
    "documents, kwargs and every conversation pass through _plain_template_data (exact JSON types kept, "
    "tuples stay tuples, other objects become '<TypeName>' strings); then _alias_reasoning_fields: for a "
    "message where one of reasoning_content, thinking, reasoning (checked in that order) is not None, the "
    "message becomes {'thinking': R, **message, 'reasoning_content': R} with R the first of those found: "
    "'thinking' is added FIRST in key order when absent (kept with its own value when present), "
    "'reasoning_content' is set to R (kept at its position when present, else appended last); 'reasoning' "
    "is never added;",
    "5. the compiled template is rendered with messages=..., tools=<list or None>, documents=<list or None>, "
    "add_generation_prompt=<bool>, **template_kwargs: `tools` and `documents` are ALWAYS defined (None when "
    "not passed), so `tools is defined` is true and `tools is none` is true without tools;",
    "6. with return_assistant_tokens_mask=True the rendering goes through _render_with_assistant_indices "
    "(environment.activate_tracker + Template.generate): each {% generation %} block records "
    "(len(''.join(blocks yielded so far)), that + len(block output)) in code points.",
]


class FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        t = cls(*FROZEN_NOW)
        return t if tz is None else t.replace(tzinfo=tz)


def utf8_spans(text, spans):
    at = [0]
    for ch in text:
        at.append(at[-1] + len(ch.encode("utf-8")))
    return [[at[a], at[b]] for a, b in spans]


def err_fields(e, phase):
    d = {"error": type(e).__name__, "message": str(e), "phase": phase,
         "error_mro": [c.__name__ for c in type(e).__mro__ if c not in (BaseException, Exception, object)]}
    if getattr(e, "lineno", None) is not None and phase == "load":
        d["lineno"] = e.lineno
    return d


def raised_in_template(e):
    return any(f.filename == "<template>" for f in traceback.extract_tb(e.__traceback__))


def render_tracked(compiled, variables):
    """Render like _render_with_assistant_indices, but with arbitrary variables."""
    blocks, spans = [], []
    with compiled.environment.activate_tracker(blocks, spans):
        for b in compiled.generate(**variables):
            blocks.append(b)
        out = "".join(blocks)
    return out, [list(s) for s in spans]


def parsed_features(env, tpl):
    """filter:NAME, test:NAME, method:NAME (x.NAME(...)), call:NAME (NAME(...)) found in the parse tree."""
    import jinja2.nodes as n
    try:
        ast = env.parse(tpl)
    except Exception:
        return []
    out = set()
    for node in ast.find_all((n.Filter, n.Test, n.Call)):
        if isinstance(node, n.Filter):
            out.add("filter:" + node.name)
        elif isinstance(node, n.Test):
            out.add("test:" + node.name)
        elif isinstance(node.node, n.Getattr):
            out.add("method:" + node.node.attr)
        elif isinstance(node.node, n.Name):
            out.add("call:" + node.node.name)
    return sorted(out)


def unit_cases(ctu):
    import jinja2
    out, seen = [], set()
    for name, tpl, variables, uses in data.unit_cases():
        assert name not in seen, f"duplicate case name {name}"
        seen.add(name)
        v = json.loads(json.dumps(variables))
        env = ctu._compile_jinja_template("").environment
        # vars as a JSON text of their own: a case whose variables a C reader refuses (integers
        # beyond 64 bits) must not make the whole file unreadable
        case = {"name": name, "template": tpl, "vars_json": json.dumps(v, ensure_ascii=False),
                "uses": uses + parsed_features(env, tpl)}
        try:
            compiled = ctu._compile_jinja_template(tpl)
        except Exception as e:  # TemplateSyntaxError, TemplateAssertionError, SyntaxError (generated code)
            case.update(err_fields(e, "load"))
            out.append(case)
            continue
        try:
            rendered = compiled.render(**copy.deepcopy(v))
            case["expected"] = rendered
            if "{% generation" in tpl or "{%- generation" in tpl:
                tracked, spans = render_tracked(compiled, copy.deepcopy(v))
                assert tracked == rendered, name
                case["generation_spans"] = spans
                case["generation_spans_utf8"] = utf8_spans(rendered, spans)
        except jinja2.exceptions.TemplateSyntaxError as e:  # raised while rendering, e.g. by include
            case.update(err_fields(e, "render"))
        except Exception as e:
            case.update(err_fields(e, "render"))
        out.append(case)
    return out


def minimal_tokenizer(special):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    vocab = {"[UNK]": 0}
    for t in special.values():
        vocab.setdefault(t, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=tk, **special)


def template_entry(ctu, tok, rel, text, sha, name, conversation, agp):
    conversation = json.loads(json.dumps(conversation))
    kwargs = {k: v for k, v in conversation.items() if k not in ("messages", "tools", "documents")}
    entry = {"template": rel, "sha256": sha, "name": name, "conversation": conversation,
             "add_generation_prompt": agp, "special_tokens": dict(tok.special_tokens_map)}
    msgs = conversation["messages"]
    if msgs:
        seen = ctu._alias_reasoning_fields(ctu._plain_template_data(ctu._normalize_chat_messages(msgs)))
        if json.dumps(seen, ensure_ascii=False) != json.dumps(msgs, ensure_ascii=False):
            entry["template_messages"] = seen
    try:
        rendered = tok.apply_chat_template(copy.deepcopy(msgs), tools=copy.deepcopy(conversation.get("tools")),
                                           documents=copy.deepcopy(conversation.get("documents")),
                                           add_generation_prompt=agp, tokenize=False, **copy.deepcopy(kwargs))
    except Exception as e:
        entry.update(err_fields(e, "render" if raised_in_template(e) else "input"))
        return entry
    entry["expected"] = rendered
    # The context the fixture describes reproduces it: template_messages (or messages), tools and
    # documents (None when absent), add_generation_prompt, special_tokens then kwargs.
    direct = ctu._compile_jinja_template(text).render(
        messages=entry.get("template_messages", msgs), tools=conversation.get("tools"),
        documents=conversation.get("documents"), add_generation_prompt=agp,
        **{**tok.special_tokens_map, **kwargs})
    assert direct == rendered, f"{rel} {name}: the described context does not reproduce apply_chat_template"
    if "generation" in text and ("{% generation" in text or "{%- generation" in text):
        outs, spans = ctu.render_jinja_template(
            conversations=[ctu._normalize_chat_messages(copy.deepcopy(msgs))],
            tools=copy.deepcopy(conversation.get("tools")), documents=copy.deepcopy(conversation.get("documents")),
            chat_template=text, return_assistant_tokens_mask=True, add_generation_prompt=agp,
            **{**tok.special_tokens_map, **copy.deepcopy(kwargs)})
        assert outs[0] == rendered, f"{rel} {name}: tracked rendering differs"
        entry["generation_spans"] = [list(s) for s in spans[0]]
        entry["generation_spans_utf8"] = utf8_spans(rendered, spans[0])
    return entry


def template_cases(ctu, templates_dir, tokenizer_dir):
    from transformers import AutoTokenizer
    text01_tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    files = {}
    for rel in MINIMAX + sorted("other/" + f for f in os.listdir(os.path.join(templates_dir, "other"))
                                if f.endswith(".jinja")):
        with open(os.path.join(templates_dir, rel), "rb") as f:
            raw = f.read()
        files[rel] = (raw.decode("utf-8"), hashlib.sha256(raw).hexdigest())

    def tokenizer_for(rel, text):
        if rel in TEXT01_TOKENIZER:
            t = copy.copy(text01_tok)
        else:
            t = minimal_tokenizer(data.SPECIAL_TOKENS.get(rel, {}))
        t.chat_template = text
        return t

    out = []
    for rel in MINIMAX:
        text, sha = files[rel]
        tok = tokenizer_for(rel, text)
        for name, c in data.MINIMAX_CONVERSATIONS:
            variants = [(name, c)]
            if rel in TEXT01_TOKENIZER:  # these index content[0]['text']
                p = data.as_parts(c)
                variants = [(name, c)] if name in data.STRING_CONTENT_PROBES else []
                if p != c or not variants:
                    variants.append((name + "_as_parts" if p != c else name, p))
            for n, v in variants:
                for agp in (False, True):
                    out.append(template_entry(ctu, tok, rel, text, sha, n, v, agp))
        for trel, name, c, agps in data.MINIMAX_EXTRA:
            if trel == rel:
                for agp in agps:
                    out.append(template_entry(ctu, tok, rel, text, sha, name, c, agp))
    for rel in (r for r in files if r.startswith("other/")):
        text, sha = files[rel]
        tok = tokenizer_for(rel, text)
        for name, c in (("simple", data.OTHER_SIMPLE), ("with_system", data.OTHER_SYSTEM),
                        ("with_tools", data.OTHER_TOOLS)):
            out.append(template_entry(ctu, tok, rel, text, sha, name, c, True))
        for trel, name, c, agp in data.OTHER_EXTRA:
            if trel == rel:
                out.append(template_entry(ctu, tok, rel, text, sha, name, c, agp))
    return out, {rel: sha for rel, (_, sha) in files.items()}


def write_json(path, header, key, items):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        f.write(f' {json.dumps(key)}: [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in items))
        f.write("\n ]\n}\n")
    os.replace(tmp, path)
    with open(path, encoding="utf-8") as f:  # the C side reads these with json.loads semantics
        assert json.load(f)[key] == json.loads(json.dumps(items))
    print(f"wrote {path}: {len(items)} {key}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", default="../shared/templates")
    ap.add_argument("--tokenizer", default="tests/fixtures/tokenizer")
    ap.add_argument("--out-dir", default="tests/fixtures/jinja")
    ap.add_argument("--any-version", action="store_true")
    args = ap.parse_args()

    import jinja2
    import tokenizers
    import transformers
    import transformers.utils.chat_template_utils as ctu

    have = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "jinja2": jinja2.__version__}
    if have != PINNED and not args.any_version:
        sys.exit(f"make_jinja_fixtures: pinned {PINNED}, found {have} (--any-version to override)")
    ctu.datetime = FrozenDatetime  # strftime_now calls the module global datetime.now()

    common = {
        "generator": "tools/make_jinja_fixtures.py (data: tools/jinja_fixture_cases.py)",
        "versions": have,
        "python": sys.version.split()[0],
        "environment": "transformers.utils.chat_template_utils._compile_jinja_template(template): "
                       "jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, "
                       "extensions=[AssistantTracker ({% generation %}), jinja2.ext.loopcontrols]); filters['tojson'] = "
                       "json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) (positional "
                       "order: ensure_ascii, indent, separators, sort_keys); globals raise_exception(msg) -> "
                       "jinja2.exceptions.TemplateError(msg), strftime_now(fmt) -> datetime.now().strftime(fmt), "
                       "dict -> TemplateDict (dict(*a, **kw), dict.fromkeys), namespace -> TemplateNamespace "
                       "(refuses names starting with '_' with SecurityError); jinja2's own globals range (sandbox "
                       "safe_range, MAX_RANGE 100000), lipsum, cycler, joiner stay. Undefined is jinja2.Undefined; "
                       "autoescape False; keep_trailing_newline False; newline_sequence '\\n' (template CR LF and CR become LF).",
        "frozen_time": "strftime_now sees datetime.now() == 2026-01-02 03:04:05 (naive local time, a Friday): "
                       "chat_template_utils.datetime monkeypatched",
    }
    os.makedirs(args.out_dir, exist_ok=True)

    cases = unit_cases(ctu)
    write_json(os.path.join(args.out_dir, "cases.json"), {
        **common,
        "format": "each case: name, template, vars_json (the render() keyword arguments as a JSON text; parse "
                  "it with Python json.loads semantics), uses (features exercised: the group's tags, then filter:/test:/method:/call: NAMEs found in jinja2's parse tree), then expected (the output) or error (the "
                  "exception class name), message (str(exception)), phase ('load': raised compiling the "
                  "template; 'render': raised rendering), error_mro (its classes, most derived first), lineno "
                  "(load errors); generation cases add generation_spans ([start, end) in code points of "
                  "expected, as the AssistantTracker records them) and generation_spans_utf8 (the same in "
                  "UTF-8 bytes). Unit cases render with exactly vars: no messages/tools/add_generation_prompt.",
    }, "cases", cases)

    entries, shas = template_cases(ctu, args.templates, args.tokenizer)
    write_json(os.path.join(args.out_dir, "templates.json"), {
        **common,
        "templates_dir": "../shared/templates (read at run time, never copied)",
        "sha256": shas,
        "normalisation": NORMALISATION,
        "functions": ["PreTrainedTokenizerBase.apply_chat_template(messages, tools=, documents=, "
                      "add_generation_prompt=, tokenize=False, **kwargs) -> expected",
                      "chat_template_utils._normalize_chat_messages, _plain_template_data, _alias_reasoning_fields "
                      "-> template_messages",
                      "chat_template_utils.render_jinja_template(..., return_assistant_tokens_mask=True) -> "
                      "generation_spans (its second return value)"],
        "special_tokens_note": "special_tokens is tokenizer.special_tokens_map as apply_chat_template passes it: "
                               "MiniMax-Text-01 and MiniMax-M1 from tests/fixtures/tokenizer (the Text-01 "
                               "tokenizer_config: bos <beginning_of_sentence>, eos <end_of_sentence>, unk "
                               "<end_of_document>); M2/M3 inferred (bos ]~!b[, eos [e~[, unk ]!d~[), unverified "
                               "against the releases and unread by both templates (M3 sets its own bos_token); "
                               "other/*: the releases' tokenizer_config values as known, only read by the "
                               "Llama 3.1, Gemma 2, DeepSeek-V3.1, Mistral-Nemo and Phi-3.5 templates.",
        "format": "each entry: template (relative to templates_dir), sha256, name, conversation (messages as the "
                  "caller passes them, before normalisation; tools, documents and other template kwargs when "
                  "passed), add_generation_prompt, special_tokens (kwargs under the conversation's), "
                  "template_messages (what the template sees as `messages` after normalisation, only where it "
                  "differs from conversation.messages), then expected or error/message/phase ('input': "
                  "apply_chat_template refused before rendering, 'render': raised by the template)/error_mro; "
                  "templates with {% generation %} add generation_spans (code points) and generation_spans_utf8.",
    }, "entries", entries)


if __name__ == "__main__":
    main()
