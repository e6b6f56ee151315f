/**
 * The records of the chaos run's tool calls through `/mcp` (CONTRACT §14):
 * what the agent-like clients sent and were told (`tool-calls.jsonl`,
 * chaos/tool-agents.ts) and what the counting tool server executed
 * (`tool-executions.jsonl`, chaos/tool-server.ts). Plain JSON lines, so a run
 * directory can be checked again offline (chaos/tool-checker.ts).
 */

/** The files, in the run directory. */
export const TOOL_CALLS_FILE = 'tool-calls.jsonl';
export const TOOL_EXECUTIONS_FILE = 'tool-executions.jsonl';
/** The tool server's name in the cluster's `mcpServers`, and its counting tool. */
export const TOOL_SERVER = 'tools';
export const TOOL_ROUTE = `mcp:${TOOL_SERVER}.charge`;

/** One execution of `charge`, logged by the tool server when the call arrived. */
export interface ToolExecution {
  /** The execution's own id, answered in `structuredContent.exec`. */
  readonly exec: string;
  /** The intended call it was made for (the agent's id, in the arguments). */
  readonly call: string;
  readonly amount: number;
  /** Epoch ms. */
  readonly at: number;
  /** `_meta["onejob/idempotencyKey"]` onejob sent (the attempt's id). */
  readonly key: string | null;
  /** `_meta["onejob/jobId"]` onejob sent. */
  readonly jobId: string | null;
}

/** How an intended call was keyed: `_meta` (through onejob/client's callToolOnce), the header, or not at all (the fingerprint). */
export type ToolKeyMode = 'meta' | 'header' | 'keyless';

/** What a tool request was answered. */
export type ToolAnswer =
  /** A tool result: the tool's (or an operator's), or onejob's `isError` result for a call in doubt. */
  | { readonly kind: 'result'; readonly isError: boolean; readonly jobId: string | null; readonly state: string | null; readonly replayed: boolean; readonly exec: string | null; readonly call: string | null; readonly resolvedBy: string | null; readonly attemptId: string | null }
  /** A JSON-RPC error, with onejob's `data.code`. */
  | { readonly kind: 'error'; readonly code: string | null; readonly rpcCode: number | null; readonly jobId: string | null };

/** One request of an agent (one JSON line in `tool-calls.jsonl`). */
export interface ToolCallEntry {
  readonly id: number;
  readonly agent: string;
  readonly owner: string;
  /** `call`: a `tools/call` of `charge`; `read`: of the read-only `balance`; `resolve`/`cancel`: the API on the call's job. */
  readonly op: 'call' | 'read' | 'resolve' | 'cancel';
  /** The intended call (`charge`'s `call` argument). */
  readonly call: string;
  readonly mode: ToolKeyMode;
  /** The key sent (`_meta` or header), or null. */
  readonly key: string | null;
  readonly sentAt: number;
  readonly recvAt: number;
  /** HTTP status, or null when no answer arrived. */
  readonly status: number | null;
  readonly outcome: 'answered' | 'timeout' | 'network';
  readonly answer?: ToolAnswer | undefined;
  /** resolve / cancel: the job and attempt, and the body sent. */
  readonly jobId?: string | undefined;
  readonly attemptId?: string | undefined;
  readonly body?: unknown;
  readonly error?: string | undefined;
}
