// Compiled, never run: the adapter's types as a Runner uses them.
import { Effect, Stream } from "effect";
import { openProcess, type ProcwireProcess, type Exit } from "@procwire/effect";

declare const request: { executable: string; arguments: string[]; working_directory: string; environment: Record<string, string> };

const program: Effect.Effect<string, never, never> = Effect.scoped(
  Effect.gen(function* () {
    const p: ProcwireProcess = yield* openProcess("ws://127.0.0.1:7777/", "inst-1", request, { token: "t", releaseTimeout: "10 seconds" });
    yield* Stream.make(new Uint8Array([104, 105, 10])).pipe(Stream.run(p.stdin));
    const chunks: Array<Uint8Array> = yield* Stream.runCollect(p.stdout);
    const exit: Exit = yield* p.wait;
    const gone: Exit | undefined = yield* p.terminate("1 second");
    const delivered: boolean = yield* p.signal("SIGTERM");
    yield* p.destroy;
    return `${chunks.length} ${exit.code ?? exit.signal} ${gone === undefined} ${delivered} ${p.evidence.process_id}`;
  }),
).pipe(
  // Every tag of the closed vocabulary can be caught by name, with its fields typed.
  Effect.catchTag("SandboxLifecycleConflict", (e) => Effect.succeed(`${e.operation} ${e.actual} ${e.expected ?? ""}`)),
  Effect.catchTag("SandboxOperationFailed", (e) => Effect.succeed(`${e.operation} ${e.reason}`)),
  Effect.catchTag("SandboxCapabilityUnavailable", (e) => Effect.succeed(e.requirement)),
  Effect.catchTag("SandboxInstanceNotFound", () => Effect.succeed("instance")),
  Effect.catchTag("SandboxFileTooLarge", () => Effect.succeed("file")),
  Effect.catchTag("SandboxOutputLimitExceeded", () => Effect.succeed("output")),
  Effect.catchTag("SandboxSnapshotForbidden", () => Effect.succeed("snapshot")),
  Effect.catchTag("SandboxSnapshotNotFound", () => Effect.succeed("snapshot")),
);
void program;
