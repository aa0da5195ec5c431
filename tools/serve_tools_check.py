#!/usr/bin/env python3
"""serve_tools_check.py: tool calls and reasoning through minimax-serve with the official `openai`
client (docs/serving.md, "Reasoning and tool calls"). Run by hand, not in CI (it needs the pinned
package below).

  python tools/serve_tools_check.py --serve BUILD/minimax-serve --model DIR [--max-tokens 96]

DIR is a chat model that calls tools: e.g. the export of recipes/tiny-m2.toml (trained on
conversations that solve problems with a `calculate` tool: `bash launch/run-local.sh -n 2
recipes/tiny-m2.toml`, then DIR = runs/tiny-m2/final).

1. Starts minimax-serve on a free loopback port with an API key.
2. A chat request with `tools` (the calculator's schema) for a question of the kind the model was
   trained on, non-streamed: prints reasoning_content, content, tool_calls and finish_reason, and
   checks that tool_calls' arguments are JSON objects with the schema's keys.
3. The same streamed: the reasoning, content and tool-call deltas, joined, must equal step 2
   (greedy decoding).
4. A follow-up turn: the assistant message with its tool_calls (as the client returned them) and a
   `tool` message with the result; the server must accept it (200) and reply.
Pinned: openai==3.51.0.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_openai_check import KEY, start, versions  # noqa: E402  (the server, its key)

PINNED = {"openai": "3.51.0"}
TOOLS = [{"type": "function", "function": {
    "name": "calculate", "description": "Evaluates an integer arithmetic expression.",
    "parameters": {"type": "object", "properties": {
        "expression": {"type": "string", "description": "e.g. \"12*7\""}},
        "required": ["expression"]}}}]
QUESTION = ("A backpack costs $260. This week it is 50% off. James buys 8 of them. "
            "How much does he pay?")
SYSTEM = "You are a careful math tutor. Use the calculator for arithmetic."


def streamed(c, msgs, max_tokens):
    reasoning, content, calls, finish = "", "", {}, None
    for ch in c.chat.completions.create(model="model", messages=msgs, tools=TOOLS,
                                        max_tokens=max_tokens, temperature=0, stream=True):
        d = ch.choices[0].delta
        reasoning += getattr(d, "reasoning_content", None) or ""
        content += d.content or ""
        for tc in d.tool_calls or []:
            e = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            e["id"] += tc.id or ""
            e["name"] += (tc.function.name or "") if tc.function else ""
            e["arguments"] += (tc.function.arguments or "") if tc.function else ""
        finish = ch.choices[0].finish_reason or finish
    return reasoning, content, [calls[k] for k in sorted(calls)], finish


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-tokens", type=int, default=96)
    a = ap.parse_args()
    versions(PINNED)
    import openai
    srv, url = start(a.serve, a.model)
    bad = 0
    try:
        c = openai.OpenAI(base_url=url + "/v1", api_key=KEY)
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        r = c.chat.completions.create(model="model", messages=msgs, tools=TOOLS,
                                      max_tokens=a.max_tokens, temperature=0)
        m = r.choices[0].message
        reasoning = getattr(m, "reasoning_content", None)
        print(f"non-streamed: finish_reason {r.choices[0].finish_reason!r}")
        print(f"  reasoning_content {reasoning!r}\n  content {m.content!r}")
        calls = m.tool_calls or []
        for tc in calls:
            print(f"  tool_call {tc.id} {tc.function.name}({tc.function.arguments})")
            args = json.loads(tc.function.arguments)
            if not isinstance(args, dict) or set(args) - {"expression"}:
                print("  FAIL: arguments are not an object of the schema's keys")
                bad += 1
        if not calls or r.choices[0].finish_reason != "tool_calls":
            print("  FAIL: no tool call (finish_reason tool_calls expected)")
            bad += 1
        s_reasoning, s_content, s_calls, s_finish = streamed(c, msgs, a.max_tokens)
        same = (s_reasoning == (reasoning or "") and s_content == (m.content or "")
                and [(x["name"], json.loads(x["arguments"])) for x in s_calls]
                == [(x.function.name, json.loads(x.function.arguments)) for x in calls]
                and s_finish == r.choices[0].finish_reason)
        print(f"streamed: {len(s_calls)} tool call(s), finish_reason {s_finish!r}, "
              f"equal to the non-streamed reply: {same}")
        bad += not same
        if calls:
            follow = msgs + [m.model_dump(exclude_none=True)] + [
                {"role": "tool", "tool_call_id": tc.id, "content": json.dumps({"result": 130})}
                for tc in calls]
            r2 = c.chat.completions.create(model="model", messages=follow, tools=TOOLS,
                                           max_tokens=a.max_tokens, temperature=0)
            m2 = r2.choices[0].message
            print(f"follow-up with the tool result: 200, finish_reason "
                  f"{r2.choices[0].finish_reason!r}, reasoning {getattr(m2, 'reasoning_content', None)!r}, "
                  f"content {m2.content!r}, tool_calls "
                  f"{[(t.function.name, t.function.arguments) for t in m2.tool_calls or []]}")
    finally:
        srv.terminate()
        srv.wait()
    print("serve_tools_check:", "ok" if not bad else f"{bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
