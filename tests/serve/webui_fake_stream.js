// webui_fake_stream.js: evaluated in the chat page by serve_webui (tests/serve/serve_webui.c).
// Replaces fetch for POST /v1/chat/completions with a stream in vLLM's shape for a reasoning
// parser and a tool-call parser (delta.reasoning_content, delta.content, delta.tool_calls
// pieces {index, id, type, function {name, arguments}} whose arguments join by index), cut
// into 7-byte pieces so that events and UTF-8 characters are split across reads. Every request
// body the page sends is kept in window.sentBodies.
(() => {
  const chunks = [
    { delta: { role: "assistant", content: "" } },
    { delta: { reasoning_content: "Let me " } },
    { delta: { reasoning_content: "think: 2 < 3 & \u00e9t\u00e9." } },
    { delta: { content: "The answer" } },
    { delta: { content: " is <b>4</b>." } },
    { delta: { tool_calls: [{ index: 0, id: "call_1", type: "function",
      function: { name: "get_weather", arguments: "" } }] } },
    { delta: { tool_calls: [{ index: 0, function: { arguments: "{\"city\": " } }] } },
    { delta: { tool_calls: [{ index: 1, id: "call_2", type: "function",
      function: { name: "get_time", arguments: "{}" } }] } },
    { delta: { tool_calls: [{ index: 0, function: { arguments: "\"Par\u00eds\"}" } }] } },
    { delta: {}, finish_reason: "tool_calls" },
  ];
  let sse = "";
  for (const c of chunks) {
    const o = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "model",
      choices: [Object.assign({ index: 0, finish_reason: null }, c)] };
    sse += "data: " + JSON.stringify(o) + "\n\n";
  }
  sse += "data: [DONE]\n\n";
  const bytes = new TextEncoder().encode(sse);
  window.sentBodies = [];
  const realFetch = window.fetch;
  window.fetch = (path, init) => {
    if (!String(path).endsWith("v1/chat/completions")) return realFetch(path, init);
    window.sentBodies.push(JSON.parse(init.body));
    let off = 0;
    const body = new ReadableStream({
      pull(ctl) {
        if (off >= bytes.length) { ctl.close(); return; }
        ctl.enqueue(bytes.slice(off, off + 7));
        off += 7;
      },
    });
    return Promise.resolve(new Response(body, {
      status: 200, headers: { "Content-Type": "text/event-stream" } }));
  };
  return "ok";
})()
