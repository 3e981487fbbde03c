// Drives a served tether agent with the official AG-UI client (@ag-ui/client's HttpAgent)
// and prints, as JSON, what the client made of each run: the events it accepted, the
// messages it built, what it was left to answer, and any error or warning it raised.
//
// Input (JSON on stdin): {"url", "token", "threadId", "steps": [step, ...]}. Each step is
// one run of the agent; before it, the step may
//   "user": "text"              add a user message
//   "resume": payload           answer every pending interrupt with this payload
//                               ({"cancel": true} cancels them instead)
//   "answer": {"content", "error"?}   add a tool message for every call the last run
//                               left pending (a frontend tool the page ran)
//   "messages": [...]           add these messages as they are
//   "tools": [...]              the frontend tools offered to this run
// A step with "signal": true prints "RUN_STARTED" on stderr as its run starts, for a
// test that must act while the run goes on. A step with "watch": "<url>" does not start a
// run: it follows the thread's live run from that URL (GET), as a second client would.
import { HttpAgent } from "@ag-ui/client";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const plan = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const warnings = [];
for (const level of ["warn", "error"]) {
  const original = console[level];
  console[level] = (...args) => {
    warnings.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "));
    if (process.env.AGUI_CLIENT_VERBOSE) original(...args);
  };
}

const agent = new HttpAgent({
  url: plan.url,
  headers: { Authorization: `Bearer ${plan.token}` },
  threadId: plan.threadId,
});

let pendingToolCallIds = [];
let counter = 0;
const nextId = (kind) => `${kind}-${++counter}`;
const runs = [];

for (const step of plan.steps) {
  if (step.user !== undefined) {
    agent.addMessage({ id: nextId("user"), role: "user", content: step.user });
  }
  for (const message of step.messages ?? []) agent.addMessage(message);
  if (step.answer !== undefined) {
    for (const toolCallId of pendingToolCallIds) {
      const message = { id: nextId("tool"), role: "tool", toolCallId, content: step.answer.content };
      if (step.answer.error !== undefined) message.error = step.answer.error;
      agent.addMessage(message);
    }
  }
  const parameters = { tools: step.tools ?? [] };
  if (step.resume !== undefined) {
    parameters.resume = agent.pendingInterrupts.map((interrupt) =>
      step.resume.cancel
        ? { interruptId: interrupt.id, status: "cancelled" }
        : { interruptId: interrupt.id, status: "resolved", payload: step.resume },
    );
  }
  agent.fetch = step.watch
    ? (_url, init) => fetch(step.watch, { method: "GET", headers: init.headers, signal: init.signal })
    : (url, init) => fetch(url, init);
  const seen = [];
  const record = { events: seen, error: null, outcome: null, pendingToolCallIds: [] };
  const before = warnings.length;
  try {
    const result = await agent.runAgent(parameters, {
      onEvent: ({ event }) => {
        seen.push(event);
        if (step.signal && event.type === "RUN_STARTED") process.stderr.write("RUN_STARTED\n");
      },
      onRunFinishedEvent: (params) => {
        record.outcome = params.outcome;
        record.pendingToolCallIds = params.pendingToolCallIds ?? [];
      },
    });
    record.result = result.result ?? null;
  } catch (error) {
    record.error = error instanceof Error ? error.message : String(error);
  }
  if (step.signal && !seen.some((e) => e.type === "RUN_STARTED")) process.stderr.write("NO_RUN\n");
  pendingToolCallIds = record.pendingToolCallIds;
  record.messages = structuredClone(agent.messages);
  record.pendingInterrupts = structuredClone(agent.pendingInterrupts);
  record.warnings = warnings.slice(before);
  runs.push(record);
}

// Leave at once: a stream the client gave up on (an error) must not keep the process up.
process.stdout.write(JSON.stringify({ runs }), () => process.exit(0));
