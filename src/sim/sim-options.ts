import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { SimSpeculative } from './spec-decode.ts'

/**
 * Faults the simulated engine can inject into a completion request:
 * - `http500`: 500 with a JSON error body, nothing streamed;
 * - `http429`: 429 with `Retry-After: 2` and a JSON error body;
 * - `drop`: after half of the tokens, the socket is destroyed without the terminating chunk;
 * - `malformed`: after a few tokens, one `data: {"choices": [` line (invalid JSON), then the
 *   stream continues normally;
 * - `stall`: after a few tokens, nothing more is sent; the connection stays open until the
 *   client goes away or the server closes;
 * - `empty`: a 200 stream with the role chunk, a finish chunk without content, usage with
 *   `completion_tokens: 0` and `[DONE]`;
 * - `cross`: the reply starts with a neighbouring request's canary marker;
 * - `usage-negative`, `usage-huge`, `usage-inflated`: the stream is whole, but its usage reports
 *   `completion_tokens` of −5, of 10¹², or 50 times the tokens it streamed (an engine whose usage
 *   accounting lies; only a request that asked for usage sees it).
 */
export const FAULT_KINDS = [
  'http500',
  'http429',
  'drop',
  'malformed',
  'stall',
  'empty',
  'cross',
  'usage-negative',
  'usage-huge',
  'usage-inflated',
] as const

/** One of FAULT_KINDS. */
export const FaultKind = z.enum(FAULT_KINDS)
export type FaultKind = z.infer<typeof FaultKind>

/** Hosts the simulated engine may bind to: it is a test fixture, never a network service. */
const LOOPBACK_HOSTS = ['127.0.0.1', '::1', 'localhost'] as const

/**
 * One injected fault: `kind` hits the listed completion requests, by 0-based arrival index among
 * the requests the sim accepts (a 400 or 404 takes no index).
 */
const FaultSpec = z.object({
  kind: FaultKind,
  requests: z.array(z.int().nonnegative()),
})
type FaultSpec = z.infer<typeof FaultSpec>

/**
 * Options of the simulated engine. Defaults are filled here; the server takes the resolved type.
 * @example startSimServer({ decodeTokPerS: 200, tokensPerChunk: 2, faults: [{ kind: 'drop', requests: [3] }] })
 */
export const SimOptions = z
  .strictObject({
    /** Loopback host to bind: `127.0.0.1`, `::1` or `localhost`. @default '127.0.0.1' */
    host: z.enum(LOOPBACK_HOSTS).default('127.0.0.1'),
    /** TCP port; 0 picks a free one (read it back from `SimServer.port`). @default 0 */
    port: z.int().min(0).max(65535).default(0),
    /** The one model id served; a request naming another model gets a 404. @default 'sim-model' */
    model: z.string().min(1).default('sim-model'),
    /** Speed of the single FIFO prefill lane, prompt tokens/s. @default 20000 */
    prefillTokPerS: z.number().positive().default(20_000),
    /** Decode speed of one stream alone, tokens/s (one engine step per token). @default 50 */
    decodeTokPerS: z.number().positive().default(50),
    /**
     * Step slowdown per extra stream in the decode batch: a step takes
     * `1000 / decodeTokPerS * (1 + batchSlowdown * (running - 1))` ms. @default 0.1
     */
    batchSlowdown: z.number().nonnegative().default(0.1),
    /**
     * Most requests admitted at once (prefilling or decoding), as vLLM's `--max-num-seqs` or
     * llama-server's slots; more wait in a FIFO queue and are admitted at step boundaries.
     * Null: unbounded (and no queue). @default null
     */
    maxBatch: z.int().positive().nullable().default(null),
    /**
     * KV budget, tokens: an admitted request reserves its prompt plus output tokens until it ends;
     * one that does not fit waits, one that could never fit gets a 400. Null: unbounded. @default null
     */
    kvBudgetTokens: z.int().positive().nullable().default(null),
    /** Tokens per streamed chunk (the last chunk may hold fewer). @default 1 */
    tokensPerChunk: z.int().positive().default(1),
    /** Leading output tokens sent as `delta.reasoning_content` (chat API only). @default 0 */
    reasoningTokens: z.int().nonnegative().default(0),
    /**
     * Natural output length in tokens (where the sim "emits EOS"); `max_tokens` still bounds it.
     * Null: generate until `max_tokens`. @default null
     */
    outputTokens: z.int().positive().nullable().default(null),
    /**
     * Context window in tokens: prompt + `max_tokens` beyond it gets a 400 (as vLLM does), and a
     * request without `max_tokens` may generate up to `maxModelLen - prompt_tokens`. @default 32768
     */
    maxModelLen: z.int().positive().default(32_768),
    /** Faults by request index. @default [] */
    faults: z.array(FaultSpec).default(() => []),
    /** Probability (0..1) that a request draws a fault from `faultKinds`. @default 0 */
    faultRate: z.number().min(0).max(1).default(0),
    /** Kinds used round-robin when `faultRate` hits. @default all of FAULT_KINDS */
    faultKinds: z
      .array(FaultKind)
      .min(1)
      .default(() => [...FAULT_KINDS]),
    /** Seed of the fault draws and of the output words of requests that send no `seed`. @default 0 */
    seed: z.int().default(0),
    /**
     * Launch-to-launch noise: the relative sd of one launch's speed. At start the engine draws one
     * multiplier exp(launchNoise · Z), Z standard normal, that scales `prefillTokPerS` and
     * `decodeTokPerS` for its whole life (`SimServer.launchSpeed`), as weights placement, clocks and
     * allocator state move a real engine from launch to launch. 0: every launch alike. @default 0
     */
    launchNoise: z.number().min(0).max(1).default(0),
    /**
     * Seed of the launch draw; null draws at random, so each launch differs. `servegate calibrate`
     * adds the launch's index (0, 1, …) to it, so its launches draw anew yet repeatably. @default null
     */
    launchSeed: z.int().nullable().default(null),
    /**
     * The share of requests the engine reports as preempted once, spread evenly by arrival index,
     * in its preemption counter: vLLM's `vllm:num_preemptions_total`, SGLang's
     * `sglang:num_retracted_requests_total` (created at the first retraction, as SGLang does). Only
     * the counter: the request is served at its usual speed. @default 0
     */
    preemptionShare: z.number().min(0).max(1).default(0),
    /** Send `: keep-alive` SSE comments after this many ms without a write; null: never. @default null */
    keepaliveMs: z.int().positive().nullable().default(null),
    /** End SSE lines with `\r\n` instead of `\n`. @default false */
    crlf: z.boolean().default(false),
    /** Answer `POST /tokenize` with 404, as engines without a tokenizer endpoint do. @default false */
    noTokenize: z.boolean().default(false),
    /** Ignore `ignore_eos` and `min_tokens`, as an engine that drops unknown fields does. @default false */
    ignoreOutputKnobs: z.boolean().default(false),
    /**
     * Whose Prometheus names the metrics endpoint uses (`/metrics`; TensorRT-LLM's
     * `/prometheus/metrics`) and which version endpoint answers. SGLang's running and waiting gauges
     * are refreshed as SGLang refreshes them: at each prefill and every `decodeLogInterval` decode
     * steps. @default 'vllm'
     */
    dialect: z.enum(['vllm', 'sglang', 'llama-server', 'trtllm']).default('vllm'),
    /** The version the version endpoint reports; for `trtllm`, below 1.3 gives its unprefixed metric names. @default 'servegate-sim' */
    version: z.string().min(1).default('servegate-sim'),
    /** TensorRT-LLM `return_perf_metrics`: without it `/prometheus/metrics` is not mounted (404). @default true */
    perfMetrics: z.boolean().default(true),
    /** TensorRT-LLM `enable_iter_perf_stats`: its running, waiting and KV gauges. @default true */
    iterationStats: z.boolean().default(true),
    /** SGLang `--decode-log-interval`: decode steps between refreshes of its gauges. @default 40 */
    decodeLogInterval: z.int().positive().default(40),
    /**
     * Leak what an aborted request held, as a broken engine does: a request whose client goes away
     * before it ends is never stepped again, but keeps its seat and KV reservation and counts as
     * running (on `/metrics` too) for as long as the sim runs. Off, an abort frees them at once.
     * @default false
     */
    leakKvOnAbort: z.boolean().default(false),
    /**
     * Speculative decoding as the engine's counters report it (vLLM's `vllm:spec_decode_*`,
     * llama.cpp's `llamacpp:spec_decode_*` on `/metrics`): each verification step drafts
     * `draftTokens` and accepts `acceptanceRate` of them over the steps. Decode timing is unchanged.
     * Null: no drafting, no such counters. @default null
     * @example { draftTokens: 3, acceptanceRate: 0.7 }
     */
    speculative: SimSpeculative.nullable().default(null),
    /**
     * Prefix cache capacity, tokens: an LRU over blocks of `prefixBlockTokens` prompt tokens, keyed
     * by the hash chain of the prompt's blocks (block i's key covers blocks 0..i, as vLLM's automatic
     * prefix caching keys them) over the prompt as the sim sees it (chat: after its chat template).
     * A request's prefill then costs only the tokens past its cached blocks. 0: no cache. @default 0
     */
    prefixCacheTokens: z.int().nonnegative().default(0),
    /** Tokens per prefix-cache block; only whole blocks are cached (vLLM's default block size). @default 16 */
    prefixBlockTokens: z.int().positive().default(16),
    /**
     * With the prefix cache on, report each request's cached prompt tokens as
     * `usage.prompt_tokens_details.cached_tokens` (0 included); false reports nothing, as vLLM without
     * `--enable-prompt-tokens-details` or SGLang without `--enable-cache-report`. @default true
     */
    reportCachedTokens: z.boolean().default(true),
    /**
     * Whether the dialect's prefix-cache reset answers: vLLM's `POST /reset_prefix_cache` and
     * llama-server's `POST /slots/{id}?action=erase`. False answers as the real engines do without
     * `VLLM_SERVER_DEV_MODE=1` (404) or `--slot-save-path` (501); SGLang's `/flush_cache` always
     * answers. @default true
     */
    cacheReset: z.boolean().default(true),
  })
  .refine((o) => o.prefixCacheTokens === 0 || o.prefixCacheTokens >= o.prefixBlockTokens, {
    message: 'holds no whole block of prefixBlockTokens',
    path: ['prefixCacheTokens'],
  })
/** Options as callers write them: every field optional. */
export type SimOptions = z.input<typeof SimOptions>
/** Options with every default filled; what the server and engine take. */
export type ResolvedSimOptions = z.infer<typeof SimOptions>
/** The name of one option. */
export type SimOptionName = keyof ResolvedSimOptions

/** How to fix each option; appended to the zod message in config errors. */
const SIM_OPTION_FIXES: Readonly<Record<SimOptionName, string>> = {
  host: 'the sim serves loopback only: use 127.0.0.1 (default), ::1 or localhost',
  port: 'use an integer 0..65535 (0 picks a free port)',
  model: 'use a non-empty model id, e.g. sim-model',
  prefillTokPerS: 'use a number > 0 (prompt tokens/s), e.g. 20000',
  decodeTokPerS: 'use a number > 0 (tokens/s of one stream), e.g. 50',
  batchSlowdown: 'use a number >= 0 (0 = batching costs nothing), e.g. 0.1',
  maxBatch: 'use an integer >= 1 (requests admitted at once), or leave it unset for no limit',
  kvBudgetTokens: 'use an integer >= 1 (KV tokens), or leave it unset for no limit',
  tokensPerChunk: 'use an integer >= 1',
  reasoningTokens: 'use an integer >= 0',
  outputTokens: 'use an integer >= 1, or leave it unset to generate until max_tokens',
  maxModelLen: 'use an integer >= 1 (tokens), e.g. 32768',
  faults: `a fault kind is one of ${FAULT_KINDS.join(', ')}; request indices are integers >= 0`,
  faultRate: 'use a number from 0 to 1',
  faultKinds: `use a non-empty list of ${FAULT_KINDS.join(', ')}`,
  seed: 'use an integer',
  launchNoise: "use a number from 0 to 1 (the relative sd of a launch's speed), e.g. 0.04",
  launchSeed: 'use an integer, or leave it unset for a random draw each launch',
  preemptionShare: 'use a number from 0 to 1 (the share of requests counted as preempted), e.g. 0.05',
  keepaliveMs: 'use an integer >= 1 (ms), or leave it unset for no keep-alives',
  crlf: 'use true or false',
  noTokenize: 'use true or false',
  dialect: 'use vllm, sglang, llama-server or trtllm',
  version: 'use a non-empty version string',
  perfMetrics: 'use true or false',
  iterationStats: 'use true or false',
  decodeLogInterval: 'use an integer >= 1 (decode steps), e.g. 40',
  ignoreOutputKnobs: 'use true or false',
  prefixCacheTokens: 'use 0 (no prefix cache) or an integer >= prefixBlockTokens (tokens the cache holds), e.g. 65536',
  prefixBlockTokens: 'use an integer >= 1 (tokens per cached block), e.g. 16',
  reportCachedTokens: 'use true or false',
  cacheReset: 'use true or false',
  leakKvOnAbort: 'use true or false',
  speculative: 'use { draftTokens: 1..64, acceptanceRate: 0..1 }, or leave it unset for no drafting',
}

/**
 * One line for the first issue: `<name>: <what is wrong> (got <value>); <the fix>`, plus how many
 * more there are. `nameOf` turns an option name into what the user typed (the field or a CLI flag).
 */
export function describeSimOptionsError(
  error: z.ZodError,
  input: unknown,
  nameOf: (option: SimOptionName, path: string) => string = (_option, path) => path,
): string {
  const [issue, ...rest] = error.issues
  if (!issue) return 'invalid options'
  const option = issue.path[0]
  const known = typeof option === 'string' && option in SIM_OPTION_FIXES ? (option as SimOptionName) : null
  const path = issue.path.map(String).join('.')
  const name = known ? nameOf(known, path) : path || 'options'
  const got = issue.path.length > 0 ? valueAt(input, issue.path) : undefined
  const gotText = got === null || ['string', 'number', 'boolean'].includes(typeof got) ? ` (got ${JSON.stringify(got)})` : ''
  const more = rest.length > 0 ? ` (${rest.length} more issue${rest.length > 1 ? 's' : ''})` : ''
  const fix = known ? SIM_OPTION_FIXES[known] : 'remove it, or check its spelling against SimOptions'
  return `${name}: ${issue.message}${gotText}; ${fix}${more}`
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined
    value = (value as Record<PropertyKey, unknown>)[key]
  }
  return value
}

/**
 * Fills the defaults once at the boundary.
 * @throws ServegateError `CONFIG_INVALID` naming the option and the fix.
 */
export function resolveSimOptions(options: SimOptions = {}): ResolvedSimOptions {
  const parsed = SimOptions.safeParse(options)
  if (!parsed.success) {
    throw new ServegateError('CONFIG_INVALID', `sim options invalid: ${describeSimOptionsError(parsed.error, options)}`)
  }
  return parsed.data
}
