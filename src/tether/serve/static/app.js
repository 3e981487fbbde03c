// The page of `tether serve`: threads, a live view of runs (AG-UI events over SSE),
// approval cards. Everything the agent or a tool wrote is shown as text, never as HTML.

const $ = (id) => document.getElementById(id);
const page = {
  token: null,
  agent: null,
  thread: null,
  following: null, // the AbortController of the stream being read
  calls: new Map(), // tool call id -> its card
  boxes: new Map(), // subagentRunId -> the element its work goes in
  texts: new Map(), // message id -> the element its text grows in
  failure: null, // why the last stream failed, shown again once the thread is redrawn
  answering: Promise.resolve(), // the decisions sent so far, one request at a time
  unsent: 0, // decisions clicked but not sent yet
};

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

// -- the API ------------------------------------------------------------------

class Refused extends Error {}

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${page.token}`, ...(options.headers || {}) };
  if (options.body) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) {
    showLogin(page.token ? "That token was refused." : "");
    throw new Refused("the token was refused");
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try { message = (await response.json()).error || message; } catch (_) { /* not JSON */ }
    throw new Refused(message);
  }
  return response;
}

const agentPath = () => `/api/agents/${encodeURIComponent(page.agent)}`;
const threadPath = (id) => `${agentPath()}/threads/${encodeURIComponent(id)}`;

// Reads server-sent events from a response, calling `handle` with each AG-UI event.
async function readEvents(response, handle) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
      if (data.length) handle(JSON.parse(data.join("\n")));
    }
  }
}

// `redraw()` says, once the stream ends, whether to redraw the thread from the server.
async function stream(path, body, { redraw = () => true } = {}) {
  stopFollowing();
  const controller = new AbortController();
  page.following = controller;
  const options = body === undefined ? {} : { method: "POST", body: JSON.stringify(body) };
  setStatus("starting"); // "running" once the server says so: only then can it be stopped
  page.failure = null;
  try {
    const response = await api(path, { ...options, signal: controller.signal });
    await readEvents(response, onEvent);
  } catch (error) {
    if (error.name !== "AbortError") page.failure = error.message;
  } finally {
    if (page.following === controller) page.following = null;
  }
  if (page.following === null) {
    if (redraw()) {
      try {
        await openThread(page.thread, { follow: false });
      } catch (_) {
        // a thread the refused request never made: nothing to redraw
      }
    }
    if (page.failure) showError(page.failure); // what went wrong stays in view
  }
  await loadThreads();
}

function stopFollowing() {
  if (page.following) page.following.abort();
  page.following = null;
}

// -- AG-UI events ----------------------------------------------------------------

function container(subagentRunId) {
  return (subagentRunId && page.boxes.get(subagentRunId)) || $("conversation");
}

function scrolled(node) {
  const view = $("conversation");
  view.scrollTop = view.scrollHeight;
  return node;
}

const handlers = {
  RUN_STARTED: () => setStatus("running"),
  MESSAGES_SNAPSHOT: (e) => renderMessages(e.messages, $("conversation")),
  TEXT_MESSAGE_START: (e) => startText(e, "assistant"),
  TEXT_MESSAGE_CONTENT: (e) => growText(e),
  REASONING_MESSAGE_START: (e) => startText(e, "thinking"),
  REASONING_MESSAGE_CONTENT: (e) => growText(e),
  TOOL_CALL_START: (e) => {
    const card = callCard(e.toolCallId, e.toolCallName, e.subagentRunId);
    card.args.textContent = ""; // a call announced again (a resumed run) is shown once
  },
  TOOL_CALL_ARGS: (e) => {
    const card = page.calls.get(e.toolCallId);
    if (card) card.args.textContent += e.delta;
  },
  TOOL_CALL_END: (e) => {
    const card = page.calls.get(e.toolCallId);
    if (card) pretty(card.args);
  },
  TOOL_CALL_RESULT: (e) => finishCall(e.toolCallId, e.content, (e.metadata || {}).is_error, (e.metadata || {}).decided),
  SUBAGENT_STARTED: (e) => subagentBox(e.subagentRunId, e.parentSubagentRunId),
  SUBAGENT_FINISHED: (e) => subagentEnded(e.subagentRunId, e.outcome && e.outcome.type === "suspended" ? "waiting" : "done"),
  SUBAGENT_ERROR: (e) => subagentEnded(e.subagentRunId, "failed"),
  STATE_SNAPSHOT: (e) => {
    if (e.snapshot.todos) showTodos(e.snapshot.todos);
    showUsage(e.snapshot.usage, e.snapshot.cost_usd);
  },
  CUSTOM: (e) => {
    if (e.name === "tether.file_changed") addFile(e.value);
  },
  RUN_FINISHED: (e) => {
    const reason = (e.metadata || {}).stop_reason || "completed";
    setStatus(reason === "interrupted" ? "waiting for approval" : reason);
  },
  RUN_ERROR: (e) => {
    setStatus("error");
    page.failure = e.message;
    showError(e.message);
  },
};

function onEvent(event) {
  const handle = handlers[event.type];
  if (handle) handle(event);
}

function startText(event, kind) {
  const node = el("div", { class: `msg ${kind}` });
  page.texts.set(event.messageId, node);
  container(event.subagentRunId).append(scrolled(node));
}

function growText(event) {
  const node = page.texts.get(event.messageId);
  if (node) {
    node.textContent += event.delta;
    scrolled(node);
  }
}

function callCard(id, name, subagentRunId) {
  if (page.calls.has(id)) return page.calls.get(id);
  const state = el("span", { class: "state", text: "running" });
  const args = el("pre", { class: "args" });
  const result = el("pre", { class: "result" });
  const node = el(
    "div",
    { class: "call running", "data-call": id },
    el("div", { class: "head" }, el("span", { class: "name", text: name }), state),
    el("details", {}, el("summary", { text: "arguments" }), args),
    el("details", { class: "output", hidden: "" }, el("summary", { text: "result" }), result),
  );
  const card = { node, state, args, result };
  page.calls.set(id, card);
  container(subagentRunId).append(scrolled(node));
  return card;
}

function pretty(pre) {
  try { pre.textContent = JSON.stringify(JSON.parse(pre.textContent), null, 2); } catch (_) { /* as sent */ }
}

function finishCall(id, content, isError, decided) {
  const card = page.calls.get(id);
  if (!card) return;
  card.node.classList.remove("running", "waiting");
  card.node.classList.add(isError ? "failed" : "ok");
  card.state.textContent = decided ? decided : isError ? "failed" : "done";
  card.result.textContent = typeof content === "string" ? content : JSON.stringify(content);
  card.node.querySelector(".output").hidden = false;
}

function subagentBox(id, parentId) {
  if (page.boxes.has(id)) return page.boxes.get(id);
  const name = id.split("/").pop();
  const status = el("span", { class: "dim", text: " running" });
  const box = el("div", { class: "subagent", "data-subagent": id }, el("div", { class: "head" }, name, status));
  box.status = status;
  container(parentId).append(scrolled(box));
  page.boxes.set(id, box);
  const item = el("li", { "data-subagent": id, text: `${"  ".repeat(id.split("/").length - 1)}${name}` });
  item.append(el("span", { class: "dim", text: " running" }));
  $("tree").append(item);
  return box;
}

function subagentEnded(id, how) {
  const box = page.boxes.get(id);
  if (box) box.status.textContent = ` ${how}`;
  const item = $("tree").querySelector(`li[data-subagent="${CSS.escape(id)}"] span`);
  if (item) item.textContent = ` ${how}`;
}

// -- the side panel --------------------------------------------------------------

function showTodos(todos) {
  $("todos").replaceChildren(...todos.map((t) => el("li", { class: t.status, text: t.content })));
}

function showUsage(usage, cost) {
  const rows = [];
  if (usage) {
    rows.push(["input tokens", usage.input_tokens], ["output tokens", usage.output_tokens]);
    if (usage.cache_read_tokens) rows.push(["cache reads", usage.cache_read_tokens]);
  }
  rows.push(["cost", cost === null || cost === undefined ? "unknown" : `$${cost.toFixed(4)}`]);
  $("usage").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })]));
  $("spend").textContent = cost ? `$${cost.toFixed(4)}` : "";
}

function diffView(text) {
  const pre = el("pre", { class: "diff" });
  for (const line of (text || "").split("\n")) {
    const kind = /^(---|\+\+\+) /.test(line) ? "names" : line.startsWith("@@") ? "hunk"
      : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    pre.append(el("span", { class: kind, text: `${line}\n` }));
  }
  return pre;
}

function addFile(change) {
  $("files").append(el("div", { class: "file" }, el("div", { class: "path", text: `${change.tool}  ${change.path}` }), diffView(change.diff)));
}

// -- approvals ---------------------------------------------------------------------

function approvalCard(interrupt) {
  const facts = interrupt.metadata || {};
  if (facts.question) return questionCard(interrupt, facts);
  const args = facts.args || {};
  const by = (facts.path || []).length > 1 ? ` by ${facts.path.slice(1).join(" / ")}` : "";
  const card = el("div", { class: "card", "data-interrupt": interrupt.id });
  const waits = el("span", { class: "dim", text: `${by} waits for your decision` });
  card.append(el("div", {}, el("strong", { text: facts.tool }), waits));
  if (facts.diff) card.append(diffView(facts.diff));
  else if (facts.tool === "execute" && typeof args.command === "string") card.append(el("pre", { text: `$ ${args.command}` }));
  else card.append(el("pre", { text: JSON.stringify(args, null, 2) }));
  const input = el("textarea", { rows: "3", hidden: "" });
  const actions = el("div", { class: "actions" });
  const allowed = facts.allowed || ["approve", "reject"];
  // A decided card keeps its place and its size, its buttons off, until the run goes on
  // (it is drawn so again while other calls wait): the second click of a double click
  // lands on nothing, never on the next card's button, which a card that moved or shrank
  // would put under the mouse.
  const decided = (kind, note) => {
    for (const button of actions.querySelectorAll("button")) button.disabled = true;
    input.readOnly = true;
    card.classList.add("decided");
    waits.textContent = `${by} ${decidedAs(kind)}: ${note}`;
  };
  const decide = (decision) => {
    if (card.classList.contains("decided")) return;
    decided(decision.kind, "sent");
    answer(interrupt.id, decision);
  };
  const withText = (kind, placeholder, initial, make) => () => {
    if (input.hidden) {
      input.hidden = false;
      input.placeholder = placeholder;
      input.value = initial;
      input.dataset.kind = kind;
      input.focus();
      return;
    }
    if (input.dataset.kind !== kind) {
      input.dataset.kind = kind;
      input.placeholder = placeholder;
      input.value = initial;
      return;
    }
    const decision = make(input.value);
    if (decision) decide(decision);
  };
  if (allowed.includes("approve")) actions.append(el("button", { class: "primary", "data-decision": "approve", text: "Approve", onclick: () => decide({ kind: "approve" }) }));
  if (allowed.includes("edit")) {
    actions.append(el("button", {
      "data-decision": "edit", text: "Edit",
      onclick: withText("edit", "the arguments, as JSON", JSON.stringify(args, null, 2), (text) => {
        try { return { kind: "edit", args: JSON.parse(text) }; } catch (error) { showError(`not JSON: ${error.message}`); return null; }
      }),
    }));
  }
  if (allowed.includes("reject")) actions.append(el("button", { "data-decision": "reject", text: "Reject", onclick: withText("reject", "why (the agent reads it)", "", (text) => ({ kind: "reject", message: text })) }));
  if (allowed.includes("respond")) actions.append(el("button", { "data-decision": "respond", text: "Respond", onclick: withText("respond", "the reply the agent gets instead", "", (text) => ({ kind: "respond", message: text })) }));
  card.append(input, actions);
  if (interrupt.decision) decided(interrupt.decision, "runs once every call is decided");
  return card;
}

// A question a tool's server asked during the call (an MCP elicitation): its message and
// form, filled in on the card. tether checks the answer against the form and says what
// does not fit; the server's words are shown as text, like everything else.
function questionCard(interrupt, facts) {
  const question = facts.question;
  const by = (facts.path || []).length > 1 ? ` by ${facts.path.slice(1).join(" / ")}` : "";
  const card = el("div", { class: "card question", "data-interrupt": interrupt.id });
  const waits = el("span", { class: "dim", text: ` ${question.asker} asks, during the call${by}` });
  card.append(el("div", {}, el("strong", { text: facts.tool }), waits));
  card.append(el("p", { class: "question-message", text: question.message }));
  const schema = question.schema || {};
  const required = new Set(schema.required || []);
  const fields = [];
  const form = el("div", { class: "form" });
  for (const [name, spec] of Object.entries(schema.properties || {})) {
    const input = fieldInput(spec);
    input.dataset.field = name;
    fields.push([name, spec, input]);
    const label = `${spec.title || name}${required.has(name) ? " *" : ""}`;
    const about = spec.description ? el("span", { class: "dim", text: spec.description }) : null;
    form.append(el("label", {}, el("span", { text: label }), input, about));
  }
  card.append(form);
  const reply = el("textarea", { rows: "3", hidden: "", placeholder: "the reply the agent gets instead" });
  const actions = el("div", { class: "actions" });
  const decide = (decision) => {
    if (card.classList.contains("decided")) return;
    for (const node of card.querySelectorAll("button, input, select, textarea")) node.disabled = true;
    card.classList.add("decided");
    waits.textContent = ` ${decidedAs(decision.kind)}: sent`;
    answer(interrupt.id, decision);
  };
  const content = () => {
    const values = {};
    for (const [name, spec, input] of fields) {
      const value = fieldValue(spec, input);
      if (value !== undefined) values[name] = value;
    }
    return values;
  };
  const allowed = facts.allowed || [];
  if (allowed.includes("answer")) {
    actions.append(el("button", { class: "primary", "data-decision": "answer", text: "Answer", onclick: () => decide({ kind: "answer", action: "accept", content: content() }) }));
    actions.append(el("button", { "data-decision": "decline", text: "Decline", onclick: () => decide({ kind: "answer", action: "decline" }) }));
    actions.append(el("button", { "data-decision": "cancel", text: "Cancel", onclick: () => decide({ kind: "answer", action: "cancel" }) }));
  }
  if (allowed.includes("respond")) {
    actions.append(el("button", {
      "data-decision": "respond", text: "Respond",
      onclick: () => {
        if (reply.hidden) { reply.hidden = false; reply.focus(); return; }
        decide({ kind: "respond", message: reply.value });
      },
    }));
  }
  card.append(reply, actions);
  if (interrupt.decision) {
    for (const node of card.querySelectorAll("button, input, select, textarea")) node.disabled = true;
    card.classList.add("decided");
    waits.textContent = ` ${decidedAs(interrupt.decision)}: runs once every call is decided`;
  }
  return card;
}

// The choices of a field, as [value, what a person reads], or null when it has none.
function fieldChoices(spec) {
  const titled = (options) => options.map((o) => [o.const, o.title || o.const]);
  const source = spec.type === "array" ? spec.items || {} : spec;
  if (source.enum) return source.enum.map((value, i) => [value, (source.enumNames || [])[i] || value]);
  if (source.oneOf) return titled(source.oneOf);
  if (source.anyOf) return titled(source.anyOf);
  return null;
}

function fieldInput(spec) {
  const choices = fieldChoices(spec);
  if (spec.type === "boolean") {
    const select = el("select", {}, el("option", { value: "", text: "—" }));
    for (const [value, text] of [["yes", "yes"], ["no", "no"]]) {
      const option = el("option", { value, text });
      if (spec.default === (value === "yes")) option.selected = true;
      select.append(option);
    }
    return select;
  }
  if (choices) {
    const many = spec.type === "array";
    const select = el("select", many ? { multiple: "" } : {});
    if (!many) select.append(el("option", { value: "", text: "—" }));
    for (const [value, text] of choices) {
      const option = el("option", { value, text });
      if (many ? (spec.default || []).includes(value) : spec.default === value) option.selected = true;
      select.append(option);
    }
    return select;
  }
  const numeric = spec.type === "integer" || spec.type === "number";
  const input = el("input", { type: numeric ? "number" : spec.format === "date" ? "date" : "text" });
  if (numeric) input.step = spec.type === "integer" ? "1" : "any";
  if (spec.default !== undefined) input.value = String(spec.default);
  return input;
}

// What a field holds, as its kind, or undefined when it is left empty (its default, if
// the form has one, is filled in by tether).
function fieldValue(spec, input) {
  if (input.multiple) {
    const chosen = [...input.selectedOptions].map((option) => option.value);
    return chosen.length ? chosen : undefined;
  }
  if (input.value === "") return undefined;
  if (spec.type === "boolean") return input.value === "yes";
  if (spec.type === "integer" || spec.type === "number") return Number(input.value);
  return input.value;
}

const decidedAs = (kind) => ({ approve: "approved", edit: "edited", reject: "rejected", respond: "answered", answer: "answered" }[kind] || kind);

// One decision per click, sent one request at a time: while other calls wait the server
// answers at once and the thread is redrawn when the last click's answer is in; the
// decision that completes the set runs the turn, streamed like any run.
function answer(interruptId, decision) {
  hideError();
  const call = page.calls.get(interruptId.split(":").pop());
  if (call) call.state.textContent = decidedAs(decision.kind);
  page.unsent += 1;
  const send = async () => {
    page.unsent -= 1;
    await stream(agentPath(), {
      threadId: page.thread,
      runId: `run_${crypto.randomUUID()}`,
      messages: [],
      resume: [{ interruptId, status: "resolved", payload: decision }],
    }, { redraw: () => page.unsent === 0 });
  };
  page.answering = page.answering.then(send, send);
  return page.answering;
}

// -- threads -----------------------------------------------------------------------

function setStatus(status) {
  const badge = $("status");
  badge.textContent = status || "";
  const busy = status === "running" || status === "starting";
  badge.className = `badge ${busy ? status : status && status.startsWith("waiting") ? "waiting" : status === "completed" ? "completed" : status === "error" ? "error" : ""}`;
  $("stop").hidden = !(status === "running" || (status && status.startsWith("waiting")) || status === "stopped (resumable)");
  $("resume").hidden = !(status === "stopped (resumable)" || status === "error");
  $("send").disabled = busy;
}

async function loadThreads() {
  const { threads } = await (await api(`${agentPath()}/threads`)).json();
  $("threads").replaceChildren(...threads.map((t) => el(
    "li",
    { class: t.thread_id === page.thread ? "current" : "", "data-thread": t.thread_id, onclick: () => openThread(t.thread_id) },
    el("span", { class: "task", text: t.task || t.thread_id }),
    el("span", { class: "meta", text: `${t.status} · ${new Date(t.updated * 1000).toLocaleString()}` }),
  )));
}

function clearView() {
  page.calls.clear();
  page.boxes.clear();
  page.texts.clear();
  for (const id of ["conversation", "approvals", "todos", "tree", "files", "usage"]) $(id).replaceChildren();
  hideError();
}

function renderMessages(messages, into) {
  for (const message of messages) {
    if (message.role === "user") into.append(el("div", { class: "msg user", text: message.content }));
    else if (message.role === "assistant") {
      if (message.content) into.append(el("div", { class: "msg assistant", text: message.content }));
      for (const call of message.toolCalls || []) {
        const card = callCard(call.id, call.function.name, null);
        into.append(card.node);
        card.args.textContent = call.function.arguments;
        pretty(card.args);
        card.state.textContent = "no result yet";
      }
    } else if (message.role === "tool") finishCall(message.toolCallId, message.content, Boolean(message.error));
  }
}

function renderSubagents(subagents, into) {
  for (const sub of subagents) {
    const box = subagentBox(sub.subagent_run_id, null);
    const task = page.calls.get(sub.call_id);
    (task ? task.node : into).after(box);
    if (!task) into.append(box);
    renderMessages(sub.messages, box);
    renderSubagents(sub.subagents, box);
    subagentEnded(sub.subagent_run_id, sub.status);
  }
}

async function openThread(id, { follow = true } = {}) {
  if (follow) stopFollowing();
  page.thread = id;
  $("title").textContent = id || "New thread";
  for (const item of $("threads").children) item.classList.toggle("current", item.dataset.thread === id);
  clearView();
  $("delete").hidden = !id;
  if (!id) {
    setStatus("");
    return;
  }
  const detail = await (await api(threadPath(id))).json();
  setStatus(detail.status);
  if (detail.running && follow) {
    await stream(`${threadPath(id)}/events`); // from the messages the run started from
    return;
  }
  renderMessages(detail.messages, $("conversation"));
  renderSubagents(detail.subagents, $("conversation"));
  for (const call of page.calls.values()) if (call.state.textContent === "no result yet") call.state.textContent = "";
  showTodos(detail.todos);
  showUsage(detail.usage, detail.cost_usd);
  for (const change of detail.files) addFile(change);
  const cards = [...detail.interrupts, ...(detail.decided || [])];
  cards.sort((a, b) => (a.metadata.position || 0) - (b.metadata.position || 0));
  for (const interrupt of cards) {
    const card = page.calls.get(interrupt.toolCallId);
    if (card) {
      card.node.classList.add("waiting");
      card.state.textContent = interrupt.decision ? decidedAs(interrupt.decision) : "waiting for approval";
    }
    $("approvals").append(approvalCard(interrupt));
  }
}

async function send(text) {
  if (!page.thread) page.thread = `thread_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  $("title").textContent = page.thread;
  $("delete").hidden = false;
  $("approvals").replaceChildren();
  hideError();
  $("conversation").append(scrolled(el("div", { class: "msg user", text })));
  const body = {
    threadId: page.thread,
    runId: `run_${crypto.randomUUID()}`,
    messages: [{ id: `user_${Date.now()}`, role: "user", content: text }],
  };
  const started = stream(agentPath(), body);
  setTimeout(loadThreads, 300);
  await started;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

function hideError() {
  $("error").hidden = true;
}

// -- start -------------------------------------------------------------------------

function showLogin(message = "") {
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("login-error").hidden = !message;
}

async function start() {
  const { agents } = await (await api("/api/agents")).json();
  $("agent").replaceChildren(...agents.map((a) => el("option", { value: a.name, text: `${a.name} (${a.model})` })));
  page.agent = agents[0].name;
  await loadThreads();
  await openThread(null);
  // Shown once ready: a message sent before would be cut off by the opening above.
  $("login").hidden = true;
  $("app").hidden = false;
}

function wire() {
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    page.token = $("token").value.trim();
    sessionStorage.setItem("tether-token", page.token);
    start().catch((error) => { if (!(error instanceof Refused)) showLogin(error.message); });
  });
  $("agent").addEventListener("change", async () => {
    page.agent = $("agent").value;
    await loadThreads();
    await openThread(null);
  });
  $("new-thread").addEventListener("click", () => openThread(null));
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("prompt").value.trim();
    if (!text) return;
    $("prompt").value = "";
    send(text);
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("composer").requestSubmit();
  });
  $("resume").addEventListener("click", () => {
    hideError();
    // no message and no decisions: the thread's unfinished run goes on from its last step
    stream(agentPath(), { threadId: page.thread, runId: `run_${crypto.randomUUID()}`, messages: [] });
  });
  $("stop").addEventListener("click", async () => {
    try { await api(`${threadPath(page.thread)}/stop`, { method: "POST" }); } catch (error) { showError(error.message); }
    if (!page.following) await openThread(page.thread);
  });
  $("delete").addEventListener("click", async () => {
    if (!confirm(`Delete thread ${page.thread}?`)) return;
    try { await api(threadPath(page.thread), { method: "DELETE" }); } catch (error) { showError(error.message); return; }
    await loadThreads();
    await openThread(null);
  });
}

const fromAddress = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromAddress) {
  sessionStorage.setItem("tether-token", fromAddress);
  history.replaceState(null, "", location.pathname + location.search);
}
page.token = sessionStorage.getItem("tether-token");
wire();
if (page.token) start().catch((error) => { if (!(error instanceof Refused)) showError(error.message); });
else showLogin();
