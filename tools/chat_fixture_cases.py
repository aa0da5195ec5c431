"""chat_fixture_cases.py: the hand-written multi-turn conversations of tools/make_chat_fixtures.py,
which writes them to tests/fixtures/chat/multiturn.jsonl (the "messages" dataset format: one record
{"messages": [...], "tools": [...]?} a line) before rendering them (no expected values here).

Each record renders without error through both ../shared/templates/MiniMax-M2.jinja and
MiniMax-M3.jinja (transformers) once the pipeline's normalisations are applied (JSON-string tool
arguments parsed, null keys dropped, the "loss" key removed). Covered: system or not (string or
part list); several user turns; reasoning_content on most assistant turns (M2 renders it only after
the last user message); inline <think> (M2's convention) and inline <mm:think> (M3's); OpenAI-shape
tool calls with arguments as objects and as JSON strings, nested / null / bool / float / non-ASCII
values, no arguments; consecutive tool messages; a tool message with part-list content; "loss":
false on one assistant message; an assistant message before the first user message; the aliases
"reasoning" and "thinking"; an empty reasoning_content; a conversation ending with a user message.
"""
import json


def function(name, description, properties, required=()):
    params = {"type": "object", "properties": properties}
    if required:
        params["required"] = list(required)
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


STR = {"type": "string"}
INT = {"type": "integer"}
WEATHER = function("get_weather", "Current weather for a city.",
                   {"city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"])
FLIGHTS = function("search_flights", "Search flights; prices in EUR.",
                   {"origin": STR, "destination": STR, "date": {"type": "string", "format": "date"},
                    "passengers": {"type": "array", "items": {"type": "object", "properties": {
                        "name": STR, "age": {"type": "number"}, "seat": {"type": ["string", "null"]}}}},
                    "flexible": {"type": "boolean"}, "max_price": {"type": "number"}},
                   ["origin", "destination"])
PY = function("run_python", "Run Python code and return stdout.", {"code": STR, "timeout": INT}, ["code"])
CALC = function("calculator", "Evaluate an arithmetic expression.",
                {"expression": STR, "precision": {"type": "integer", "default": 2}}, ["expression"])
CLOCK = function("server_time", "The server's current time (ISO 8601).", {})
FILES = function("read_file", "Read a text file.",
                 {"path": STR, "range": {"type": "object", "properties": {
                     "start": INT, "end": {"type": ["integer", "null"]}}}}, ["path"])


def tc(id_, name, args):
    """An OpenAI-shape tool call; args an object or a JSON string."""
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}


def tool(id_, name, content):
    return {"role": "tool", "tool_call_id": id_, "name": name, "content": content}


def S(content):
    return {"role": "system", "content": content}


def U(content):
    return {"role": "user", "content": content}


def A(content=None, reasoning=None, calls=None, **kw):
    """An assistant message; content None is written as null (the pipeline drops null keys)."""
    m = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if calls is not None:
        m["tool_calls"] = calls
    m.update(kw)
    return m


def records():
    recs = []
    # 1. system, tools, two user turns, reasoning on every assistant turn, object + JSON-string args,
    #    consecutive tool messages
    recs.append({"messages": [
        S("You are a travel assistant. Be concise."),
        U("What's the weather in Paris right now?"),
        A("", "The user wants the current weather in Paris. I should call get_weather.",
          [tc("call_1", "get_weather", {"city": "Paris", "unit": "celsius"})]),
        tool("call_1", "get_weather", "{\"temperature\": 14.5, \"condition\": \"light rain\"}"),
        A("It is 14.5 °C with light rain in Paris.", "The tool says 14.5 C and light rain. Report it."),
        U("And in Berlin and Rome? Compare them."),
        A(None, "Two cities: call get_weather twice in one turn.",
          [tc("call_2", "get_weather", "{\"city\": \"Berlin\", \"unit\": \"celsius\"}"),
           tc("call_3", "get_weather", "{\"city\": \"Rome\"}")]),
        tool("call_2", "get_weather", "{\"temperature\": 9, \"condition\": \"cloudy\"}"),
        tool("call_3", "get_weather", "{\"temperature\": 19, \"condition\": \"sunny\"}"),
        A("Berlin: 9 °C, cloudy. Rome: 19 °C, sunny. Rome is 10 degrees warmer.",
          "Berlin 9 cloudy, Rome 19 sunny; Rome is warmer by 10 degrees."),
    ], "tools": [WEATHER]})
    # 2. no system, no tools; inline <think> in content (M2's convention) on both turns
    recs.append({"messages": [
        U("Is 221 a prime number?"),
        A("<think>\n221 = 13 * 17, so it is composite.\n</think>\n\nNo: 221 = 13 × 17."),
        U("What about 223?"),
        A("<think>\nCheck divisors up to 14: 2, 3, 5, 7, 11, 13 do not divide 223.\n</think>\n\nYes, 223 is prime."),
    ]})
    # 3. nested / null / bool / float / non-ASCII arguments, object args, then a JSON-string call
    recs.append({"messages": [
        S("Du bist ein Reiseassistent. Antworte auf Deutsch."),
        U("Finde Flüge von Zürich nach 東京 am 1. März für Ana (34) und Björn (7½)."),
        A("Ich suche passende Flüge.", "Two passengers, one child; flexible dates not requested.",
          [tc("call_f1", "search_flights", {"origin": "Zürich", "destination": "東京", "date": "2026-03-01",
              "passengers": [{"name": "Ana", "age": 34, "seat": None}, {"name": "Björn", "age": 7.5, "seat": "12A"}],
              "flexible": False, "max_price": 1234.5, "notes": None})]),
        tool("call_f1", "search_flights", "[{\"flight\": \"LX160\", \"price\": 1180.0, \"stops\": 0}]"),
        A("LX160, nonstop, 1180 € für beide.", "One nonstop result under the budget."),
        U("Gibt es etwas Flexibleres, auch mit Umstieg?"),
        A(None, "Repeat the search with flexible=true; arguments as a JSON string this time.",
          [tc("call_f2", "search_flights", json.dumps({"origin": "Zürich", "destination": "東京",
              "passengers": [{"name": "Ana", "age": 34}, {"name": "Björn", "age": 7.5, "seat": None}],
              "flexible": True, "max_price": 999.99, "options": {"stops": [0, 1], "via": ["Helsinki", None], "refundable": True}},
              ensure_ascii=False))]),
        tool("call_f2", "search_flights", "[{\"flight\": \"AY1516+AY73\", \"price\": 912.4, \"stops\": 1}]"),
        A("Ja: AY1516 + AY73 über Helsinki, 912,40 €.", "One-stop option via Helsinki at 912.40."),
    ], "tools": [FLIGHTS, WEATHER]})
    # 4. "loss": false on one assistant message (a wrong answer kept as context)
    recs.append({"messages": [
        U("Compute 17 * 23."),
        A("17 * 23 = 381.", "17*20=340, 17*3=51, 340+51=381... wait, that's 391.", loss=False),
        U("Are you sure? Please check with the calculator."),
        A(None, "Verify with the tool.", [tc("c1", "calculator", {"expression": "17*23", "precision": 0})]),
        tool("c1", "calculator", "391"),
        A("Sorry, I was wrong: 17 * 23 = 391.", "The calculator gives 391; correct the earlier mistake."),
    ], "tools": [CALC]})
    # 5. the last message is a user message (split mode must not invent a sample for it)
    recs.append({"messages": [
        S("You are a helpful math tutor."),
        U("What is the derivative of x^3?"),
        A("The derivative of x^3 is 3x^2.", "Power rule: d/dx x^n = n x^(n-1)."),
        U("And of sin(x)?"),
        A("cos(x).", "Standard derivative."),
        U("Thanks! One more later."),
    ]})
    # 6. part-list content in user messages (and in a system message)
    recs.append({"messages": [
        S([{"type": "text", "text": "You answer briefly."}, {"type": "text", "text": " Use metric units."}]),
        U([{"type": "text", "text": "How tall is the Eiffel Tower?"}, {"type": "text", "text": " Roughly."}]),
        A("About 330 m including antennas.", "Known fact: 330 m."),
        U([{"type": "text", "text": "And in feet?"}]),
        A("About 1,083 ft.", "330 m * 3.281 = 1083 ft."),
    ]})
    # 7. an agentic coding loop: three tool rounds after one user message, reasoning on each step,
    #    a tool message with part-list content
    recs.append({"messages": [
        U("Read config.toml and tell me the learning rate, then check it is below 1e-3 with Python."),
        A(None, "First read the file.", [tc("r1", "read_file", {"path": "config.toml", "range": {"start": 1, "end": None}})]),
        tool("r1", "read_file", [{"type": "text", "text": "[train]\nlr = 3e-4\nsteps = 1000\n"}]),
        A("The learning rate is 3e-4; checking it now.", "lr = 3e-4. Now run Python.",
          [tc("p1", "run_python", "{\"code\": \"print(3e-4 < 1e-3)\", \"timeout\": 10}")]),
        tool("p1", "run_python", "True\n"),
        A("lr = 3e-4, which is below 1e-3 (checked: True).", "Python printed True."),
    ], "tools": [FILES, PY]})
    # 8. an assistant greeting before the first user message (never trained in split mode)
    recs.append({"messages": [
        S("You are a shop assistant for a bakery."),
        A("Hello! How can I help you today?"),
        U("Do you have croissants? 🥐"),
        A("Yes, fresh croissants every morning until 11:00.", "The bakery bakes croissants daily."),
        U("Price?"),
        A("€1.80 each, or 5 for €8.", "Price list: 1.80 each, 5 for 8."),
    ]})
    # 9. four user turns, reasoning on every assistant turn (M2 drops all but the last in one sample)
    recs.append({"messages": [
        U("Pick a number between 1 and 10."),
        A("7.", "Any number works; 7."),
        U("Double it."),
        A("14.", "7 * 2 = 14."),
        U("Subtract 4."),
        A("10.", "14 - 4 = 10."),
        U("Is it even?"),
        A("Yes, 10 is even.", "10 mod 2 = 0."),
    ]})
    # 10. "reasoning" and "thinking" aliases, an empty reasoning_content, a null content dropped
    recs.append({"messages": [
        {"role": "system", "content": "Reply in one sentence.", "name": None},
        U("Name a primary colour."),
        {"role": "assistant", "content": "Red.", "reasoning": "Primary colours: red, yellow, blue."},
        U("Another one?"),
        {"role": "assistant", "content": "Blue.", "thinking": "Not red again; blue."},
        U("And a secondary colour?"),
        {"role": "assistant", "content": "Green.", "reasoning_content": ""},
    ]})
    # 11. a tool call with no arguments, a call with many scalar types, JSON-string arguments with escapes
    recs.append({"messages": [
        S("You can run code."),
        U("What time is it on the server? Then print the Python version and compute 0.1 + 0.2 exactly."),
        A("Let me check.", "The clock tool takes no arguments.", [tc("t0", "server_time", "{}")]),
        tool("t0", "server_time", "2026-01-02T03:04:05Z"),
        A(None, "Now the version.", [tc("v1", "run_python", "{\"code\": \"import sys\\nprint(sys.version_info[:2])\"}")]),
        tool("v1", "run_python", "(3, 11)"),
        A(None, "Now use fractions for exactness; pass a timeout and a quoted string.",
          [tc("v2", "run_python", {"code": "from fractions import Fraction as F\nprint(F(1, 10) + F(2, 10), \"exact\")",
                                    "timeout": 5})]),
        tool("v2", "run_python", "3/10 exact"),
        A("Server time 2026-01-02T03:04:05Z; Python 3.11; 0.1 + 0.2 is exactly 3/10 (as floats it is 0.30000000000000004).",
          "Fraction gives 3/10; floats give 0.30000000000000004."),
    ], "tools": [CLOCK, PY]})
    # 12. parallel calls with mixed argument styles, three consecutive tool results, then a user follow-up
    recs.append({"messages": [
        S("You are a weather bot."),
        U("Weather in Oslo, Kyiv and São Paulo?"),
        A("Checking three cities.", "Three parallel calls.",
          [tc("w1", "get_weather", {"city": "Oslo"}),
           tc("w2", "get_weather", "{\"city\": \"Київ\", \"unit\": \"celsius\"}"),
           tc("w3", "get_weather", {"city": "São Paulo", "unit": "fahrenheit"})]),
        tool("w1", "get_weather", "{\"temperature\": -3, \"condition\": \"snow\"}"),
        tool("w2", "get_weather", "{\"temperature\": 2, \"condition\": \"fog\"}"),
        tool("w3", "get_weather", "{\"temperature\": 88.7, \"condition\": \"humid\"}"),
        A("Oslo −3 °C snow; Kyiv 2 °C fog; São Paulo 88.7 °F humid.", "Summarise all three."),
        U("Which one is warmest?"),
        A("São Paulo (88.7 °F ≈ 31.5 °C).", "88.7 F = 31.5 C, the warmest."),
    ], "tools": [WEATHER]})
    # 13. inline <mm:think> in content (M3's convention; M2 keeps it as text), one with a tool call
    recs.append({"messages": [
        U("Convert 5 miles to kilometres."),
        A("<mm:think>\n1 mile = 1.609344 km, so 5 miles = 8.04672 km.\n</mm:think>\n\n5 miles ≈ 8.05 km."),
        U("Now 26.2 miles, computed exactly."),
        A("<mm:think>Use the calculator for 26.2 * 1.609344.</mm:think>",
          calls=[tc("k1", "calculator", {"expression": "26.2 * 1.609344", "precision": 3})]),
        tool("k1", "calculator", "42.165"),
        A("<mm:think>42.165 km.</mm:think>26.2 miles = 42.165 km (a marathon)."),
    ], "tools": [CALC]})
    return recs
