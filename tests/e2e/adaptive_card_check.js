// Validate an Adaptive Card with Microsoft's own `adaptivecards` library (package.json devDependencies): reads the card
// JSON on stdin, prints {"parse": [...], "validation": [...], "version": "x.y"} - every event of parsing (unknown types,
// invalid values) and every issue of `validateProperties()` (missing required properties, ...), with their phase.
const AC = require("adaptivecards/dist/adaptivecards.js");

let input = "";
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const json = JSON.parse(input);
  const card = new AC.AdaptiveCard();
  const context = new AC.SerializationContext(AC.Versions.v1_5);
  card.parse(json, context);
  const parse = [];
  for (let i = 0; i < context.eventCount; i++) {
    const e = context.getEventAt(i);
    parse.push({ phase: e.phase, event: e.event, message: e.message });
  }
  const results = card.validateProperties();
  const validation = results.validationEvents.map((e) => ({ phase: e.phase, event: e.event, message: e.message }));
  process.stdout.write(JSON.stringify({ parse, validation, version: card.version ? card.version.toString() : null }));
});
