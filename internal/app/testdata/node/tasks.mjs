// The official MCP TypeScript SDK's tasks client against a running
// Sagacity, driven by internal/app TestMCPTasks: node tasks.mjs URL SAGA
// prints one JSON object a line of what the client sees, and reads from
// standard input what to do next, one command a line:
//
//   task TOOL ARGS     call TOOL with ARGS (JSON) through
//                      client.experimental.tasks.callToolStream, printing
//                      each message of the stream as {"type", ...}
//   get TASKID         tasks/get, printed as {"type":"get","task"}
//   cancel TASKID      tasks/cancel, printed as {"type":"cancelled","task"},
//                      or its refusal as {"type":"refused","error"}
//   hold SAGA TOOL ARGS  call TOOL with ARGS in SAGA as a client without
//                      tasks, asking for progress: {"type":"held","result"}
//   end                close the client and exit
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, saga] = process.argv.slice(2);
const print = (o) => process.stdout.write(JSON.stringify(o) + "\n");

async function connect(name, saga) {
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
    requestInit: { headers: { "Sagacity-Saga-Id": saga } },
  }));
  // tools/list tells the client which tools' calls may become tasks.
  const { tools } = await client.listTools();
  print({ type: "tools", tasks: tools.filter((t) => t.execution?.taskSupport).map((t) => t.name),
    capabilities: client.getServerCapabilities() });
  return client;
}

const client = await connect("ts-tasks", saga);
const calls = [];
for await (const line of createInterface({ input: process.stdin })) {
  const [command, first, ...rest] = line.split(" ");
  switch (command) {
    case "task":
      calls.push((async () => {
        const stream = client.experimental.tasks.callToolStream({ name: first, arguments: JSON.parse(rest.join(" ")) });
        for await (const m of stream) {
          print({ type: m.type, task: m.task, result: m.result, error: m.error && String(m.error.message) });
        }
      })());
      break;
    case "get":
      print({ type: "get", task: await client.experimental.tasks.getTask(first) });
      break;
    case "cancel":
      try {
        print({ type: "cancelled", task: await client.experimental.tasks.cancelTask(first) });
      } catch (e) {
        print({ type: "refused", error: `${e.code}: ${e.message}` });
      }
      break;
    case "hold": {
      const plain = await connect("ts-held", first);
      calls.push(plain.callTool({ name: rest[0], arguments: JSON.parse(rest.slice(1).join(" ")) }, undefined, {
        onprogress: () => {},
        resetTimeoutOnProgress: true,
      }).then((result) => print({ type: "held", result })).finally(() => plain.close()));
      break;
    }
    case "end":
      await Promise.all(calls);
      await client.close();
      process.exit(0);
  }
}
