/**
 * @toolgate/client: one import from a model's tool call to a toolgate
 * gateway and back, on @grpc/grpc-js.
 *
 *     import { Gateway } from "@toolgate/client";
 *     const gw = new Gateway("127.0.0.1:50051");
 *     messages.push(...(await gw.executeOpenAI(reply.choices[0].message.tool_calls)));
 *
 * The types and the grpc-js client are generated from the proto by ts-proto
 * (see docs/clients.md for why), into `gen/`.
 */

import { readFileSync } from "node:fs";

import * as grpc from "@grpc/grpc-js";

import { ErrorInfo, RetryInfo } from "../gen/google/rpc/error_details.js";
import { Status } from "../gen/google/rpc/status.js";
import * as pb from "../gen/toolgate/v1/toolgate.js";
import { type Call, fromAnthropic, fromOpenAI, fromResponses, toAnthropic, toOpenAI, toResponses } from "./adapters.js";

export { type Call, fromAnthropic, fromOpenAI, fromResponses, toAnthropic, toOpenAI, toResponses } from "./adapters.js";
export * as proto from "../gen/toolgate/v1/toolgate.js";

/** The metadata header that carries an end user's token (the gateway's default). */
export const USER_TOKEN_HEADER = "x-toolgate-user-token";

/** Every error this client throws. */
export class ToolgateError extends Error {
  override name = "ToolgateError";
}

/** The gateway cannot be reached (down, wrong address, TLS mismatch). */
export class GatewayUnavailable extends ToolgateError {
  override name = "GatewayUnavailable";
  constructor(
    readonly address: string,
    detail: string,
  ) {
    super(`cannot reach the gateway at ${address}: ${detail}`);
  }
}

/** The call did not finish before its deadline. */
export class DeadlineExceeded extends ToolgateError {
  override name = "DeadlineExceeded";
}

/** The call was cancelled (its AbortSignal fired). */
export class Cancelled extends ToolgateError {
  override name = "Cancelled";
}

/** The gateway refused the credentials. */
export class AuthenticationError extends ToolgateError {
  override name = "AuthenticationError";
}

/** The gateway refused the request itself (INVALID_ARGUMENT and the like). */
export class RequestError extends ToolgateError {
  override name = "RequestError";
  constructor(
    readonly code: grpc.status,
    message: string,
    /** `ErrorInfo.reason` when the gateway gave one (e.g. TOOL_NOT_FOUND). */
    readonly reason = "",
  ) {
    super(message);
  }
}

/** The principal's request limit (RESOURCE_EXHAUSTED): try again after `retryAfter` seconds (from RetryInfo; undefined when absent). */
export class RateLimited extends RequestError {
  override name = "RateLimited";
  constructor(
    message: string,
    readonly retryAfter: number | undefined,
  ) {
    super(grpc.status.RESOURCE_EXHAUSTED, message);
  }
}

/** Strict resolution met unknown names: `unknown` in request order, and up to 3 `suggestions` each, best first. */
export class ToolResolutionError extends RequestError {
  override name = "ToolResolutionError";
  constructor(
    message: string,
    readonly unknown: string[],
    readonly suggestions: Record<string, string[]>,
    reason: string,
  ) {
    super(grpc.status.NOT_FOUND, message, reason);
  }
}

/** A tool `searchTools` found, and its score (higher fits better). */
export interface Match {
  tool: Tool;
  score: number;
}

export interface Tool {
  name: string;
  description: string;
  /** The JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
  aliases: string[];
  /** "builtin", "registry", "pack:<name>" or "mcp:<server>". */
  source: string;
  idempotent: boolean;
}

export interface Resolution {
  tools: Tool[];
  unknown: string[];
  suggestions: Record<string, string[]>;
  message: string;
  catalogVersion: string;
}

export interface Repair {
  /** "TOOL_NAME", "ARGUMENT_NAME", "ARGUMENTS_JSON", "ARGUMENT_VALUE", "ARGUMENTS_ENVELOPE", "WORDS_DROPPED" (or "REPAIR_KIND_<n>" from a newer gateway). */
  kind: string;
  original: string;
  repaired: string;
}

export interface ToolError {
  /** "UNKNOWN_TOOL", "INVALID_ARGUMENTS", "NOT_FOUND", "REFUSED", "TOOL_CRASHED", "TIMEOUT", "UNAVAILABLE", "RETRY_BUDGET_EXHAUSTED", "RATE_LIMITED", "PERMISSION_DENIED" (or "ERROR_KIND_<n>"). */
  kind: string;
  /** Written for the model: give it back as the tool's result. */
  message: string;
  retryable: boolean;
  suggestions: string[];
  availableTools: string[];
  availableToolsTotal: number;
  required: string[];
  optional: string[];
  violations: { field: string; description: string }[];
  /** RATE_LIMITED: seconds until the call would pass. */
  retryAfter?: number;
}

/** One call's answer; `content` is what the model reads next. */
export class Outcome {
  constructor(
    readonly ok: boolean,
    readonly tool: string,
    readonly repairs: Repair[],
    readonly argumentsJson: string,
    readonly resultJson: string,
    readonly error: ToolError | undefined,
    readonly replayed: boolean,
    readonly callId: string,
  ) {}

  /** RATE_LIMITED: seconds until the call would pass (undefined otherwise). */
  get retryAfter(): number | undefined {
    return this.error?.retryAfter;
  }

  /** The result, parsed (undefined when there is none). */
  get result(): unknown {
    return this.resultJson ? JSON.parse(this.resultJson) : undefined;
  }

  /** The text for the model: the result, or the error written for it. */
  get content(): string {
    return this.ok ? this.resultJson : (this.error?.message ?? "the tool call failed");
  }
}

export interface ExecuteOptions {
  callId?: string;
  /** The agent's tool set (tool, alias or toolset names); empty: every tool the caller may use. */
  tools?: string[];
  strict?: boolean;
  dryRun?: boolean;
  sessionId?: string;
  idempotencyKey?: string;
  /** Milliseconds. */
  timeout?: number;
  signal?: AbortSignal;
}

/**
 * TLS to the gateway. Each is a path to a PEM file, or the PEM itself (a
 * Buffer, or a string that starts with `-----BEGIN`), as the Python
 * client's `TLS` takes them.
 */
export interface TlsOptions {
  /** The CA to trust (default: the system's roots). */
  ca?: Buffer | string;
  /** A client certificate and its key, for mTLS. */
  cert?: Buffer | string;
  key?: Buffer | string;
}

/** The PEM bytes of a TLS option: read from its file when it is a path. */
function pem(what: string, value: Buffer | string | undefined): Buffer | null {
  if (value === undefined) return null;
  if (Buffer.isBuffer(value)) return value;
  if (value.trimStart().startsWith("-----BEGIN")) return Buffer.from(value);
  try {
    return readFileSync(value);
  } catch (err) {
    throw new Error(`cannot read the TLS ${what} file ${value}: ${(err as Error).message}`);
  }
}

export interface GatewayOptions {
  apiKey?: string;
  userToken?: string;
  userTokenHeader?: string;
  /** TLS to the gateway (also implied by an https:// address). */
  tls?: boolean | TlsOptions;
  /** Default deadline of every call, in milliseconds. */
  timeout?: number;
}

const FORMATS = { openai: pb.ToolFormat.TOOL_FORMAT_OPENAI, anthropic: pb.ToolFormat.TOOL_FORMAT_ANTHROPIC, mcp: pb.ToolFormat.TOOL_FORMAT_MCP };
export type ToolFormat = keyof typeof FORMATS;

/** An enum value's name without its prefix; a value this client does not know (a newer gateway) keeps its number. */
function enumName(names: Record<number, string>, value: number, prefix: string): string {
  const name = names[value];
  return name && name !== "UNRECOGNIZED" ? name.slice(prefix.length) : `${prefix}${value}`;
}

function toolOf(t: pb.Tool): Tool {
  return {
    name: t.name,
    description: t.description,
    parameters: t.parametersJson ? JSON.parse(t.parametersJson) : {},
    aliases: t.aliases,
    source: t.source,
    idempotent: t.idempotent,
  };
}

/** An ExecuteResponse as the client's Outcome. */
export function outcomeOf(r: pb.ExecuteResponse): Outcome {
  const e = r.error;
  const error: ToolError | undefined = e && {
    kind: enumName(pb.ErrorKind, e.kind, "ERROR_KIND_"),
    message: e.message,
    retryable: e.retryable,
    suggestions: e.suggestions,
    availableTools: e.availableTools,
    availableToolsTotal: e.availableToolsTotal,
    required: e.expectedParameters?.required ?? [],
    optional: e.expectedParameters?.optional ?? [],
    violations: e.violations.map((v) => ({ field: v.field, description: v.description })),
    retryAfter: e.retryAfter ? seconds(e.retryAfter) : undefined,
  };
  const repairs = r.repairs.map((x) => ({ kind: enumName(pb.RepairKind, x.kind, "REPAIR_KIND_"), original: x.original, repaired: x.repaired }));
  return new Outcome(r.ok, r.tool, repairs, r.argumentsJson, r.resultJson, error, r.replayed, r.callId);
}

/** A google.protobuf.Duration in seconds. */
function seconds(d: { seconds: number; nanos: number }): number {
  return Number(d.seconds) + d.nanos / 1e9;
}

/** The arguments as the request carries them: a string exactly as emitted, or an object serialised to JSON. */
export function argumentsText(args: unknown): string {
  if (args === undefined || args === null) return "";
  if (typeof args === "string") return args;
  let text: string | undefined;
  try {
    text = JSON.stringify(args, (_key, value) => {
      if (typeof value === "bigint") throw new TypeError("a BigInt has no JSON form");
      if (typeof value === "number" && !Number.isFinite(value)) throw new TypeError(`${value} has no JSON form`);
      if (typeof value === "function" || typeof value === "symbol") throw new TypeError(`a ${typeof value} has no JSON form`);
      return value;
    });
  } catch (err) {
    throw new TypeError(`the arguments are not JSON-serialisable: ${(err as Error).message}`);
  }
  if (text === undefined) throw new TypeError("the arguments are not JSON-serialisable");
  return text;
}

/** tonic percent-encodes some characters of status messages (`?` as `%3F`); grpc-js leaves them so. */
export function decodeMessage(message: string): string {
  try {
    return decodeURIComponent(message);
  } catch {
    return message;
  }
}

function translate(err: grpc.ServiceError, address: string): ToolgateError {
  const message = decodeMessage(err.details ?? "");
  switch (err.code) {
    case grpc.status.UNAVAILABLE:
      return new GatewayUnavailable(address, message);
    case grpc.status.DEADLINE_EXCEEDED:
      return new DeadlineExceeded(`the gateway at ${address} did not answer in time`);
    case grpc.status.CANCELLED:
      return new Cancelled(`the call to ${address} was cancelled`);
    case grpc.status.UNAUTHENTICATED:
      return new AuthenticationError(message);
  }
  let reason = "";
  let failure: pb.ResolveFailure | undefined;
  let retryAfter: number | undefined;
  const [details] = err.metadata?.get("grpc-status-details-bin") ?? [];
  if (details instanceof Buffer) {
    for (const any of Status.decode(details).details) {
      if (any.typeUrl.endsWith("/google.rpc.ErrorInfo")) reason = ErrorInfo.decode(any.value).reason;
      if (any.typeUrl.endsWith("/toolgate.v1.ResolveFailure")) failure = pb.ResolveFailure.decode(any.value);
      if (any.typeUrl.endsWith("/google.rpc.RetryInfo")) {
        const delay = RetryInfo.decode(any.value).retryDelay;
        if (delay) retryAfter = seconds(delay);
      }
    }
  }
  if (err.code === grpc.status.RESOURCE_EXHAUSTED) return new RateLimited(message, retryAfter);
  if (failure) {
    const suggestions = Object.fromEntries(failure.unknown.map((u) => [u.name, u.suggestions]));
    return new ToolResolutionError(message, failure.unknown.map((u) => u.name), suggestions, reason);
  }
  return new RequestError(err.code, message, reason);
}

/** `host:port` for grpc-js, and whether the scheme asked for TLS. */
function addressOf(addr: string): [string, boolean | undefined] {
  for (const [scheme, tls] of [["https://", true], ["http://", false]] as const) {
    if (addr.startsWith(scheme)) return [addr.slice(scheme.length).replace(/\/+$/, ""), tls];
  }
  if (addr.includes("://")) throw new Error(`unsupported address '${addr}': expected host:port, http://host:port or https://host:port`);
  return [addr, undefined];
}

type Unary<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;

/** A client of a toolgate gateway. Every method returns a promise. */
export class Gateway {
  readonly address: string;
  private readonly client: pb.ToolGatewayServiceClient;
  private readonly metadata: grpc.Metadata;
  private readonly timeout?: number;

  constructor(addr = "127.0.0.1:50051", options: GatewayOptions = {}) {
    const [target, schemeTls] = addressOf(addr);
    this.address = addr;
    const tls = options.tls ?? schemeTls;
    const files: TlsOptions = typeof tls === "object" ? tls : {};
    const credentials = tls
      ? grpc.credentials.createSsl(pem("ca", files.ca), pem("key", files.key), pem("cert", files.cert))
      : grpc.credentials.createInsecure();
    this.client = new pb.ToolGatewayServiceClient(target, credentials);
    this.metadata = new grpc.Metadata();
    if (options.apiKey) this.metadata.set("authorization", `Bearer ${options.apiKey}`);
    if (options.userToken) this.metadata.set(options.userTokenHeader ?? USER_TOKEN_HEADER, options.userToken);
    this.timeout = options.timeout;
  }

  close(): void {
    this.client.close();
  }

  private call<Req, Res>(method: Unary<Req, Res>, request: Req, timeout?: number, signal?: AbortSignal): Promise<Res> {
    const wait = timeout ?? this.timeout;
    const options: Partial<grpc.CallOptions> = wait === undefined ? {} : { deadline: new Date(Date.now() + wait) };
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new Cancelled(`the call to ${this.address} was cancelled`));
      const call = method.call(this.client, request, this.metadata, options, (error, response) => {
        signal?.removeEventListener("abort", cancel);
        if (error) reject(translate(error, this.address));
        else resolve(response);
      });
      const cancel = () => call.cancel();
      signal?.addEventListener("abort", cancel, { once: true });
    });
  }

  /** The tools `names` mean. Strict: unknown names throw ToolResolutionError; else they are dropped and listed. */
  async resolve(names: string[], options: { strict?: boolean; timeout?: number } = {}): Promise<Resolution> {
    const r = await this.call(this.client.resolve, { names, strict: options.strict }, options.timeout);
    return {
      tools: r.tools.map(toolOf),
      unknown: r.unknown.map((u) => u.name),
      suggestions: Object.fromEntries(r.unknown.map((u) => [u.name, u.suggestions])),
      message: r.message,
      catalogVersion: r.catalogVersion,
    };
  }

  /** The tools (all, or `names`): Tool objects, or with `format` the provider's tools array as plain JSON. */
  listTools(options?: { names?: string[]; timeout?: number }): Promise<Tool[]>;
  listTools(options: { names?: string[]; format: ToolFormat; timeout?: number }): Promise<unknown>;
  async listTools(options: { names?: string[]; format?: ToolFormat; timeout?: number } = {}): Promise<unknown> {
    let format: pb.ToolFormat = pb.ToolFormat.TOOL_FORMAT_UNSPECIFIED;
    if (options.format !== undefined) {
      if (!(options.format in FORMATS)) throw new Error(`unknown format '${options.format}': expected 'openai', 'anthropic' or 'mcp'`);
      format = FORMATS[options.format];
    }
    const r = await this.call(this.client.listTools, { tools: options.names ?? [], format }, options.timeout);
    return options.format ? JSON.parse(r.formattedJson) : r.tools.map(toolOf);
  }

  /**
   * Your tools (within `toolset`, when given) that fit a task written in words, best first: to offer a model the few a
   * step needs. `limit` is at most 50 (0 means 8); an empty query rejects with a RequestError.
   */
  async searchTools(query: string, limit = 8, options: { toolset?: string; timeout?: number } = {}): Promise<Match[]> {
    const r = await this.call(this.client.searchTools, { query, limit, toolset: options.toolset ?? "" }, options.timeout);
    return r.tools.map((tool, i) => ({ tool: toolOf(tool), score: r.scores[i] }));
  }

  /** Runs one tool call exactly as the model emitted it. A tool problem is an Outcome with `ok` false, never a rejection. */
  async execute(tool: string, args?: unknown, options: ExecuteOptions = {}): Promise<Outcome> {
    const request: pb.ExecuteRequest = {
      tool,
      argumentsJson: argumentsText(args),
      callId: options.callId ?? "",
      tools: options.tools ?? [],
      strict: options.strict,
      dryRun: options.dryRun ?? false,
      sessionId: options.sessionId ?? "",
      idempotencyKey: options.idempotencyKey ?? "",
    };
    return outcomeOf(await this.call(this.client.execute, request, options.timeout, options.signal));
  }

  /** A model turn's calls, sent at once, answered in order. */
  executeAll(calls: Call[], options: Omit<ExecuteOptions, "callId"> = {}): Promise<Outcome[]> {
    return Promise.all(calls.map((c) => this.execute(c.tool, c.arguments, { ...options, callId: c.callId })));
  }

  /** An assistant message's `tool_calls`, run; their `role: "tool"` messages. */
  async executeOpenAI(toolCalls: unknown[], options: Omit<ExecuteOptions, "callId"> = {}) {
    const calls = toolCalls.map(fromOpenAI);
    const outcomes = await this.executeAll(calls, options);
    return calls.map((c, i) => toOpenAI(outcomes[i], c.callId));
  }

  /** A Responses API output's `function_call` items, run; their `function_call_output` items (other items skipped). */
  async executeResponses(items: unknown[], options: Omit<ExecuteOptions, "callId"> = {}) {
    const calls = items.filter((i) => !isOther(i, "function_call")).map(fromResponses);
    const outcomes = await this.executeAll(calls, options);
    return calls.map((c, i) => toResponses(outcomes[i], c.callId));
  }

  /** An Anthropic assistant message's `tool_use` blocks, run; the user message of their `tool_result` blocks (other blocks skipped). */
  async executeAnthropic(content: unknown[], options: Omit<ExecuteOptions, "callId"> = {}) {
    const calls = content.filter((b) => !isOther(b, "tool_use")).map(fromAnthropic);
    const outcomes = await this.executeAll(calls, options);
    return { role: "user" as const, content: calls.map((c, i) => toAnthropic(outcomes[i], c.callId)) };
  }
}

/** An item of a turn that is of another known kind (a message, reasoning, text). */
function isOther(item: unknown, kind: string): boolean {
  return typeof item === "object" && item !== null && "type" in item && (item as { type: unknown }).type !== kind;
}
