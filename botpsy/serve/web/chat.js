// The botpsy chat page: streams /v1/chat/completions and shows reasoning (folded), answers,
// tool calls and results as cards, confirm / deny buttons for sensitive calls (assistant
// mode), a stop button, and live time to first token and tokens per second.
// Model text is only ever set with textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { messages: [], controller: null, mode: "model", model: "" };

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function scrollDown() { const box = $("conversation"); box.scrollTop = box.scrollHeight; }

function compact(value) { return JSON.stringify(value); }

class AssistantView {  // one assistant reply: reasoning, text and cards in the order they happen
  constructor() {
    this.root = element("div", "msg assistant");
    this.last = null;    // the block being written: {kind: "reasoning" | "content", node, text}
    this.text = "";      // the latest answer text (what the conversation keeps)
    this.calls = {};     // model mode: tool call index -> {card, name, args}
    this.cards = {};     // confirmation id -> card
    $("conversation").append(this.root);
  }
  block(kind) {
    if (this.last && this.last.kind === kind) return this.last;
    let node;
    if (kind === "reasoning") {
      node = element("details", "reasoning");
      node.append(element("summary", null, "Reasoning"), element("pre"));
    } else {
      node = element("div", "content");
    }
    this.root.append(node);
    this.last = { kind, node, text: "" };
    return this.last;
  }
  reasoning(text) {
    const block = this.block("reasoning");
    block.text += text;
    block.node.querySelector("pre").textContent = block.text;
    block.node.querySelector("summary").textContent = `Reasoning (${block.text.trim().length} characters)`;
  }
  content(text) {
    const block = this.block("content");
    block.text += text;
    block.node.textContent = block.text.replace(/^\s+/, "");
    this.text = block.text;
  }
  card(kind, head, result) {
    const card = element("div", "card " + kind);
    card.append(element("div", "call", head));
    if (result !== undefined) card.append(element("div", "result", result));
    this.root.append(card);
    this.last = null;  // text after a card starts a new block below it
    return card;
  }
  callDelta(call) {  // model mode: the client owns the tools, so the call is only shown
    let entry = this.calls[call.index];
    if (!entry) {
      entry = this.calls[call.index] = { name: call.function.name || "", args: "" };
      entry.card = this.card("tool", "");
    }
    entry.args += call.function.arguments || "";
    entry.card.querySelector(".call").textContent = `→ ${entry.name}(${entry.args})`;
  }
  step(step) {
    if (step.type === "tool") {
      const card = this.card(step.error ? "tool error" : "tool", `→ ${step.name}(${compact(step.arguments)})`,
                             `← ${compact(step.result)}`);
      card.dataset.callId = step.call_id;
    } else if (step.type === "model" && step.parse_errors && step.parse_errors.length) {
      this.note(`format error (${step.parse_errors[0].kind}); the model retries`);
    }
  }
  confirmation(event) {
    const card = this.card("confirm", `${event.name}(${compact(event.arguments)}) is a sensitive action. Allow it?`);
    const approve = element("button", "approve", "Approve");
    const deny = element("button", "deny", "Deny");
    const verdict = element("span", "verdict");
    approve.type = deny.type = "button";
    approve.onclick = () => decide(event.id, true, card);
    deny.onclick = () => decide(event.id, false, card);
    card.append(approve, deny, verdict);
    this.cards[event.id] = card;
  }
  decided(event) {
    const card = this.cards[event.id];
    if (!card) return;
    card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    card.querySelector(".verdict").textContent = event.approved ? "approved" : (event.answered ? "denied" : "no answer: declined");
  }
  note(text, bad) { this.root.append(element("div", bad ? "note bad" : "note", text)); }
}

async function decide(id, approved, card) {
  card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  const response = await fetch(`/v1/confirmations/${encodeURIComponent(id)}`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ approved }) });
  if (!response.ok) card.querySelector(".verdict").textContent = "too late: the request is no longer waiting";
}

class Meter {  // live TTFT and tokens per second, counted from the stream as it arrives
  constructor() { this.sent = performance.now(); this.first = null; this.deltas = 0; }
  tick() {
    const t = performance.now();
    if (this.first === null) { this.first = t; $("ttft").textContent = `${Math.round(t - this.sent)} ms`; }
    this.deltas += 1;
    const seconds = (t - this.first) / 1000;
    if (seconds > 0.05) $("tps").textContent = (this.deltas / seconds).toFixed(1);
    $("tokens").textContent = String(this.deltas);
  }
  usage(usage) {
    if (!usage || this.first === null) return;
    const seconds = (performance.now() - this.first) / 1000;
    $("tokens").textContent = String(usage.completion_tokens);
    if (seconds > 0) $("tps").textContent = (Math.max(0, usage.completion_tokens - 1) / seconds).toFixed(1);
  }
}

function handleEvent(payload, view, meter) {
  if (payload === "[DONE]") return;
  const chunk = JSON.parse(payload);
  if (chunk.error) { view.note(`error: ${chunk.error.message}`, true); return; }
  const choice = (chunk.choices || [])[0];
  const delta = (choice && choice.delta) || {};
  if (delta.reasoning_content) { meter.tick(); view.reasoning(delta.reasoning_content); }
  if (delta.content) { meter.tick(); view.content(delta.content); }
  (delta.tool_calls || []).forEach((call) => view.callDelta(call));
  const ext = chunk.botpsy;
  if (ext && ext.event === "step") view.step(ext.step);
  else if (ext && ext.event === "confirmation") view.confirmation(ext);
  else if (ext && ext.event === "confirmation_decided") view.decided(ext);
  else if (ext && ext.event === "loop") view.note(`loop guard: a ${ext.kind} loop in the ${ext.where} (${ext.action})`);
  else if (ext && ext.event === "thinking_budget") view.note(`thinking budget reached at ${ext.reasoning_tokens} tokens`);
  if (choice && choice.finish_reason && choice.finish_reason !== "stop" && choice.finish_reason !== "tool_calls") {
    view.note(`finished: ${choice.finish_reason}` + (ext && ext.stop_reason ? ` (${ext.stop_reason})` : ""));
  }
  if (chunk.usage) meter.usage(chunk.usage);
  scrollDown();
}

async function readEvents(response, view, meter) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      event.split("\n").filter((l) => l.startsWith("data:")).forEach((l) => handleEvent(l.slice(5).trim(), view, meter));
    }
  }
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

async function send(text) {
  state.messages.push({ role: "user", content: text });
  $("conversation").append(element("div", "msg user", text));
  const view = new AssistantView();
  const meter = new Meter();
  state.controller = new AbortController();
  setBusy(true);
  scrollDown();
  const body = { model: state.model, messages: state.messages, stream: true,
                 stream_options: { include_usage: true }, enable_thinking: $("think").checked };
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      signal: state.controller.signal });
    if (!response.ok) {
      const error = await response.json().catch(() => ({ error: { message: response.statusText } }));
      view.note(`error ${response.status}: ${error.error.message}`, true);
      state.messages.pop();
      return;
    }
    await readEvents(response, view, meter);
  } catch (error) {
    view.note(error.name === "AbortError" ? "stopped" : `error: ${error}`, error.name !== "AbortError");
  } finally {
    state.controller = null;
    setBusy(false);
    state.messages.push({ role: "assistant", content: view.text.trim() });
    $("input").focus();
  }
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (state.controller) state.controller.abort(); });
$("clear").addEventListener("click", () => {
  if (state.controller) state.controller.abort();
  state.messages = [];
  $("conversation").textContent = "";
});

fetch("/health").then((r) => r.json()).then((health) => {
  state.mode = health.mode;
  state.model = health.model;
  $("mode").textContent = `${health.mode} mode · ${health.model}`;
  document.body.dataset.ready = "1";
}).catch(() => { $("mode").textContent = "server unreachable"; });
