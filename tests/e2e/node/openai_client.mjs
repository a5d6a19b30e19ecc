// The npm `openai` client against the app's Responses API (tests/e2e/test_e2e_openai_node.py runs it):
// create, stream, background + retrieve, the approval round trip, a stateless input list, models, errors.
// Prints one JSON object with what it saw; the test asserts on it and on the app's store.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "unused", maxRetries: 0 });
const seen = {};

const { data: plain, request_id: requestId } = await client.responses.create({ model: "helper", input: "What is a?" })
  .withResponse();
seen.plain = { id: plain.id, status: plain.status, text: plain.output_text, types: plain.output.map((i) => i.type),
  requestId };

const history = [{ role: "user", content: "What is a?" }, ...plain.output];
const stateless = await client.responses.create({ model: "helper", input: [...history, { role: "user", content: "And b?" }] });
seen.stateless = { id: stateless.id, text: stateless.output_text, previous: stateless.previous_response_id };

const stream = await client.responses.create({ model: "helper", input: "Stream it", stream: true });
const kinds = [];
let deltas = "";
let final = null;
for await (const event of stream) {
  kinds.push(event.type);
  if (event.type === "response.output_text.delta") deltas += event.delta;
  if (event.type === "response.completed") final = event.response;
}
const finalText = (final?.output ?? []).filter((i) => i.type === "message").flatMap((i) => i.content).map((p) => p.text).join("");
seen.stream = { first: kinds[0], last: kinds.at(-1), deltas, text: finalText };

const asking = await client.responses.create({ model: "helper", input: "Email Bob", background: true });
let held = asking;
for (let i = 0; i < 600 && !["completed", "failed", "cancelled"].includes(held.status); i++) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  held = await client.responses.retrieve(asking.id);
}
const request = held.output.find((item) => item.type === "mcp_approval_request");
const answered = await client.responses.create({
  model: "helper",
  previous_response_id: held.id,
  input: [{ type: "mcp_approval_response", approval_request_id: request.id, approve: true }],
});
seen.approval = { first: held.id, request: request.name, next: answered.id, text: answered.output_text,
  previous: answered.previous_response_id, call: answered.output.find((i) => i.type === "mcp_call")?.error ?? "ok" };

const models = await client.models.list();
seen.models = models.data.map((m) => m.id);

try {
  await client.responses.create({ model: "helper", input: "hi", temperature: 0.3 });
  seen.error = null;
} catch (error) {
  seen.error = { status: error.status, param: error.param, code: error.code, type: error.type,
    requestId: error.requestID };
}
console.log(JSON.stringify(seen));
