import { createHash, type Hash } from 'node:crypto'
import type { TokenizerProbe } from '../client/tokenize.ts'
import { ServegateError } from '../errors.ts'
import type { Length, LengthsPlan } from '../schema/lengths.ts'
import type { PrefixGroupsPlan } from '../schema/prefix-groups.ts'
import type { Api } from '../schema/run.ts'
import { type BodyExtras, bodyExtras } from './body.ts'
import { bodyEntry, updateStreamEntry } from './bytes.ts'
import { canaryMarker } from './canary.ts'
import { loadDataset, type LoadedDataset, type ResolvedRow } from './dataset.ts'
import { calibrationTolerance, type FittedSizes, PromptCalibrator } from './prompt-calibrator.ts'
import { prefixGroupsOf } from './prefix-groups.ts'
import { ESTIMATED_TOKENS_PER_WORD, PromptLayout } from './prompt-layout.ts'
import { RequestSizes } from './request-sizes.ts'
import { ConversationLayout } from './conversation.ts'
import { loadConversations } from './conversation-file.ts'
import { proseSource } from './text.ts'
import { prepareTraceBlocks } from './trace-blocks.ts'
import { type ResolvedWorkloadSpec, WorkloadSpec } from './workload-spec.ts'

export { calibrationTolerance, fitPieces } from './prompt-calibrator.ts'
export { ESTIMATED_TOKENS_PER_WORD } from './prompt-layout.ts'

/** One planned request: its model-free body and what the checks need to judge its reply. */
export interface PreparedRequest {
  /** JSON body without the model name: the bytes both arms receive. */
  body: string
  /** Prompt tokens by the engine's tokenizer at planning time; null when estimated. */
  plannedPromptTokens: number | null
  /** The request's `max_tokens` (a replayed trace sets it per request). */
  maxTokens: number
  canaryMarker: string | null
  /** The dataset row whose reference answer scores the reply; null for synthetic kinds. */
  row: ResolvedRow | null
  /** Conversations: the request's session (0-based); null for single-turn workloads. */
  session: number | null
  /** Conversations: the request's turn in its session (1-based); null for single-turn workloads. */
  turn: number | null
  /** Shared-prefix groups: the request's group (0-based); null (or absent) otherwise. */
  group?: number | null
}

/** What judging a reply needs of its request once the body is sent. */
export type PlannedRequest = Omit<PreparedRequest, 'body'>

interface Calibration {
  method: 'engine-tokenizer' | 'estimate' | 'none'
  tokenizer: string | null
  /** The planned size; with per-request sizes (a trace), their mean. */
  targetTokens: number
  toleranceTokens: number
  /** Requests whose calibrated count missed the tolerance. */
  outsideTolerance: number
  /** Set whenever sizes are estimated or a tokenizer call failed: never a silent wrong size. */
  warning: string | null
  /** The shared block's calibrated size, tokens (shared prefix only). */
  sharedPrefixTokens: number | null
}

/**
 * A workload planned once per plan: the same bytes serve both arms. Bodies are not held: each
 * is rebuilt from its index on demand (`request`), so a plan of millions of requests costs a
 * few bytes per request (its calibrated size, when a tokenizer calibrated it) until it is sent.
 */
export interface PreparedWorkload {
  spec: ResolvedWorkloadSpec
  api: Api
  maxTokens: number
  /** Measured requests are indices 0 … measuredCount − 1. */
  measuredCount: number
  /** Warm-up requests follow the measured ones: indices measuredCount … measuredCount + warmupCount − 1. */
  warmupCount: number
  /** Builds request `index`: the same bytes on every call, on either arm. */
  request(index: number): PreparedRequest
  /** Request `index` without its body (cheap: no text is generated). */
  planned(index: number): PlannedRequest
  calibration: Calibration
  extras: BodyExtras
  dataset: { path: string; sha256: string; rows: number } | null
  /** Conversations: how requests map to sessions and turns, and their bodies with a live history; null otherwise. */
  conversation: ConversationLayout | null
  /** Sizes drawn from a distribution, as the record keeps them; null (or absent) when none was drawn. */
  lengths?: LengthsPlan | null
  /** Shared-prefix groups as planned; null (or absent) otherwise. */
  prefixGroups?: PrefixGroupsPlan | null
}

/** A measured request's own size, where a replayed trace dictates it. */
export interface PlannedSize {
  promptTokens: number
  maxTokens: number
  /** The trace row's `hash_ids`: the prompt is these blocks' text, in order (`blockTokens` each). @default null */
  hashIds?: readonly number[] | null
}

export interface PreparePlan {
  api: Api
  /** The cell's `max_tokens`: one size, or a distribution each request draws its own from (seeded by the workload's seed). */
  maxTokens: Length
  requests: number
  warmupRequests: number
  /**
   * Per measured request (index i), its prompt tokens and `max_tokens`, replacing the spec's
   * `promptTokens` and the plan's `maxTokens`; warm-up requests keep those. @default null
   */
  sizes?: readonly PlannedSize[] | null
  /** Tokens per block of the sizes' `hashIds` (a trace with `hash_ids`): prompts are built from blocks. @default null */
  blockTokens?: number | null
}

/** Validates a workload spec; the error names each bad field under `workload.`. */
export function resolveWorkloadSpec(input: WorkloadSpec): ResolvedWorkloadSpec {
  const parsed = WorkloadSpec.safeParse(input)
  if (!parsed.success) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `invalid workload: ${parsed.error.issues.map((i) => `${['workload', ...i.path].join('.')}: ${i.message}`).join('; ')}`,
    )
  }
  return parsed.data
}

/**
 * Plans a workload once: synthetic prompts calibrated to the planned size with the engine's
 * own tokenizer when it has one (else estimated, with a warning), canary instructions, the
 * shared or unique prefix, sampling and output-control fields, and the request-stream hash.
 * Warm-up requests get their own indices after the measured ones. With a tokenizer every
 * request is fitted here (a few tokenizer calls each; `signal` stops it between requests);
 * bodies are built only when `request` asks for them.
 */
export async function prepareWorkload(
  input: WorkloadSpec,
  plan: PreparePlan,
  probe: TokenizerProbe | null,
  signal?: AbortSignal,
): Promise<PreparedWorkload> {
  const spec = resolveWorkloadSpec(input)
  if (spec.kind === 'conversation') return prepareConversation(spec, fixedMaxTokens(plan), probe)
  const dataset = await datasetOf(spec, plan.api)
  // Drawn once per plan, before anything is fitted: each request is fitted to its own size.
  const sizes = new RequestSizes(spec, plan)
  if (plan.blockTokens != null) return prepareTraceBlocks(spec, { ...plan, blockTokens: plan.blockTokens }, sizes, probe, signal)
  const groups = prefixGroupsOf(spec, plan.requests, plan.requests + plan.warmupRequests)
  const sharedTokens = groups === null ? sharedTokensOf(spec, sizes) : 0
  const calibrator = new PromptCalibrator(probe, plan.api)
  const shared = sharedTokens > 0 ? await calibrator.fitShared(spec, sharedTokens) : null
  const systems = groups === null ? null : await calibrator.fitGroups(spec.seed, groups.spec.groups, groups.spec.systemTokens, signal)
  const layoutGroups = groups === null || systems === null ? null : { of: (i: number) => groups.of(i), systems: systems.texts }
  const layout = new PromptLayout(spec, plan, shared?.text ?? null, dataset, { sizes, groups: layoutGroups })
  // Calibrated sizes are kept as two numbers a request; without a tokenizer the size is
  // estimated from the index alone when the body is built.
  const fitted = await calibrator.fitRequests(layout, signal)

  const planned = (index: number): PlannedRequest => {
    if (!Number.isInteger(index) || index < 0 || index >= layout.total) throw new RangeError(`request ${index} is not in this plan`)
    const tokens = fitted?.tokens[index]
    return {
      plannedPromptTokens: tokens === undefined || Number.isNaN(tokens) ? null : tokens,
      maxTokens: layout.size(index).maxTokens,
      canaryMarker: spec.canaries ? canaryMarker(spec.seed, index) : null,
      row: layout.row(index),
      session: null,
      turn: null,
      group: layout.group(index),
    }
  }
  const request = (index: number): PreparedRequest => {
    const p = planned(index)
    const pieces = p.row !== null ? 0 : fitted !== null ? (fitted.pieces[index] as number) : layout.estimate(index)
    return { body: layout.body(index, pieces, p.row), ...p }
  }
  return {
    spec,
    api: plan.api,
    maxTokens: sizes.maxTokens,
    measuredCount: plan.requests,
    warmupCount: plan.warmupRequests,
    request,
    planned,
    calibration: calibrationOf(spec, sizes, calibrator, fitted, systems === null ? (shared?.tokens ?? null) : meanOrNull(systems.tokens)),
    extras: layout.extras,
    dataset: dataset === null ? null : { path: dataset.path, sha256: dataset.sha256, rows: dataset.rows.length },
    conversation: null,
    lengths: sizes.record(),
    prefixGroups: groups?.plan() ?? null,
  }
}

/** The plan of a workload whose requests share one `max_tokens` (a conversation's turns). */
function fixedMaxTokens(plan: PreparePlan): PreparePlan & { maxTokens: number } {
  const { maxTokens } = plan
  if (typeof maxTokens !== 'number')
    throw new ServegateError('CONFIG_INVALID', "maxTokens: a conversation's turns share one max_tokens; pass one number")
  return { ...plan, maxTokens }
}

/** The rounded mean of calibrated sizes; null when any was estimated. */
function meanOrNull(tokens: ReadonlyArray<number | null>): number | null {
  if (tokens.length === 0 || tokens.some((t) => t === null)) return null
  return Math.round((tokens as number[]).reduce((s, t) => s + t, 0) / tokens.length)
}

/** Words of generated prose the engine's tokenizer counts to measure its tokens per word. */
const RATIO_SAMPLE_WORDS = 400

/**
 * Plans a conversation at once, whatever its size: each turn's text is sized at the engine
 * tokenizer's tokens per word, measured once on a sample of the same prose (estimated without
 * a tokenizer), so no request is fitted one by one; `usage.prompt_tokens` is recorded per request.
 */
async function prepareConversation(
  spec: ResolvedWorkloadSpec,
  plan: PreparePlan & { maxTokens: number },
  probe: TokenizerProbe | null,
): Promise<PreparedWorkload> {
  const expected = (spec.sessions ?? 1) * (spec.turns ?? 1)
  if (plan.requests !== expected) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `requests: a conversation sends sessions × turns = ${expected} requests, not ${plan.requests}; remove requests or set it to ${expected}`,
    )
  }
  if (plan.api !== 'chat') throw new ServegateError('CONFIG_INVALID', "api: a conversation is sent as chat messages; pass api: 'chat'")
  let tokensPerWord = ESTIMATED_TOKENS_PER_WORD
  let measured = false
  const tokenizer = probe?.tokenizer ?? null
  if (tokenizer !== null) {
    try {
      const sample = proseSource(spec.seed, Number.MAX_SAFE_INTEGER).take(RATIO_SAMPLE_WORDS)
      tokensPerWord = ((await tokenizer.countText(sample)) - (await tokenizer.countText(''))) / RATIO_SAMPLE_WORDS
      measured = tokensPerWord > 0
      if (!measured) tokensPerWord = ESTIMATED_TOKENS_PER_WORD
    } catch {
      // The tokenizer failed: the estimate stands, and the record's warning says so.
    }
  }
  const extras = bodyExtras(plan.api, plan.maxTokens, spec.sampling, spec.outputControl)
  const file = spec.conversations === undefined ? null : await loadConversations(spec.conversations)
  const conversation = new ConversationLayout(spec, plan.maxTokens, plan.requests, extras, tokensPerWord, file)
  const planned = (index: number): PlannedRequest => {
    if (!Number.isInteger(index) || index < 0 || index >= plan.requests + plan.warmupRequests) {
      throw new RangeError(`request ${index} is not in this plan`)
    }
    return { plannedPromptTokens: null, maxTokens: plan.maxTokens, canaryMarker: null, row: null, ...conversation.at(index) }
  }
  const how = measured
    ? `${tokensPerWord.toFixed(3)} tokens per word, measured once with the engine's tokenizer (${tokenizer?.description ?? ''})`
    : `an estimated ${ESTIMATED_TOKENS_PER_WORD} tokens per word${probe?.warning ? ` (${probe.warning})` : ''}`
  return {
    spec,
    api: plan.api,
    maxTokens: plan.maxTokens,
    measuredCount: plan.requests,
    warmupCount: plan.warmupRequests,
    request: (index) => ({ body: conversation.body(index), ...planned(index) }),
    planned,
    calibration: {
      method: 'estimate',
      tokenizer: measured ? (tokenizer?.description ?? null) : null,
      targetTokens: conversation.plan.userTokens ?? 0,
      toleranceTokens: calibrationTolerance(conversation.plan.userTokens ?? 0),
      outsideTolerance: 0,
      warning: `conversation turns are sized at ${how}; usage.prompt_tokens is recorded per request`,
      sharedPrefixTokens: conversation.plan.systemTokens > 0 ? conversation.plan.systemTokens : null,
    },
    extras,
    dataset: file === null ? null : { path: file.path, sha256: file.sha256, rows: file.conversations.length },
    conversation,
  }
}

/** The dataset of the `dataset` kind, loaded and checked against the API; null for synthetic kinds. */
async function datasetOf(spec: ResolvedWorkloadSpec, api: Api): Promise<LoadedDataset | null> {
  if (spec.kind !== 'dataset') return null
  if (spec.datasetPath === undefined)
    throw new ServegateError('CONFIG_INVALID', 'workload.datasetPath: the dataset kind needs a JSONL file; pass --dataset FILE')
  const dataset = await loadDataset(spec.datasetPath)
  if (api !== 'chat' && dataset.rows.some((r) => r.images.length > 0)) {
    throw new ServegateError('CONFIG_INVALID', 'api: dataset rows with images need the chat API; pass --api chat')
  }
  return dataset
}

/** The shared block's planned size, tokens (0 without one); it must leave room for the rest of every prompt. */
function sharedTokensOf(spec: ResolvedWorkloadSpec, sizes: RequestSizes): number {
  const half = typeof spec.promptTokens === 'number' ? Math.floor(spec.promptTokens / 2) : 0
  const sharedTokens = spec.prefixCache.mode === 'shared' ? spec.prefixCache.tokens : spec.kind === 'shared-prefix' ? half : 0
  const smallest = sizes.smallestPromptTokens
  if (sharedTokens >= smallest) {
    const prompt = sizes.prompt === null ? `a ${smallest}-token prompt` : `the smallest drawn prompt (${smallest} tokens)`
    throw new ServegateError(
      'CONFIG_INVALID',
      `workload.prefixCache.tokens: ${sharedTokens} shared tokens leave no room in ${prompt}; make it smaller than ${smallest}`,
    )
  }
  return sharedTokens
}

/** How the prompts were sized, as the record states it. */
function calibrationOf(
  spec: ResolvedWorkloadSpec,
  sizes: RequestSizes,
  calibrator: PromptCalibrator,
  fitted: FittedSizes | null,
  sharedPrefixTokens: number | null,
): Calibration {
  // Per-request sizes (a trace's or drawn): the record states their mean; each request was held to its own tolerance.
  const target = sizes.targetPromptTokens
  const { tokenizer, warning } = calibrator
  return {
    method: spec.kind === 'dataset' ? 'none' : tokenizer !== null && warning === null ? 'engine-tokenizer' : 'estimate',
    tokenizer: tokenizer?.description ?? null,
    targetTokens: target,
    toleranceTokens: calibrationTolerance(target),
    outsideTolerance: fitted?.outsideTolerance ?? 0,
    warning: spec.kind === 'dataset' && warning !== null ? `${warning} (dataset prompts are not resized)` : warning,
    sharedPrefixTokens,
  }
}

/**
 * `requestStreamSha256` (bytes.ts) fed one body at a time: sha256 over each body's length and
 * digest, in order, without holding the bodies.
 */
export class StreamHash {
  readonly #hash: Hash = createHash('sha256')
  /** Bodies hashed so far. */
  count = 0
  update(body: string | Uint8Array): void {
    this.updateDigest(...bodyEntry(body))
  }
  /** Appends a body known only by its length and sha256 (hex), as a wire digest keeps it. */
  updateDigest(bytes: number, sha256: string): void {
    updateStreamEntry(this.#hash, bytes, sha256)
    this.count++
  }
  /** The hex digest of what was hashed so far; the hash goes on accepting bodies. */
  digest(): string {
    return this.#hash.copy().digest('hex')
  }
}

/**
 * The request-stream hash of requests `from` … `to` − 1 (the measured ones by default), built
 * one body at a time: the hash a cell records when it sends them in order.
 */
export function streamSha256(w: PreparedWorkload, from = 0, to = w.measuredCount): string {
  const hash = new StreamHash()
  for (let i = from; i < to; i++) hash.update(w.request(i).body)
  return hash.digest()
}

const cache = new Map<string, Promise<PreparedWorkload>>()
const CACHE_LIMIT = 32

/**
 * Calibrates once per plan: the first cell of a plan builds the workload (probing the
 * tokenizer only then); every later cell with the same plan, on either arm, reuses its bytes.
 */
export function preparedFor(
  input: WorkloadSpec,
  plan: PreparePlan,
  probe: () => Promise<TokenizerProbe | null>,
  signal?: AbortSignal,
): Promise<PreparedWorkload> {
  // A digest, not the JSON: a 100,000-row trace's plan is megabytes of sizes and block ids.
  const key = createHash('sha256')
    .update(JSON.stringify([resolveWorkloadSpec(input), plan]))
    .digest('hex')
  let prepared = cache.get(key)
  if (prepared === undefined) {
    prepared = probe().then((p) => prepareWorkload(input, plan, p, signal))
    // A failed preparation is not cached: the next cell may retry.
    prepared.catch(() => cache.delete(key))
    if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value as string)
    cache.set(key, prepared)
  }
  return prepared
}
