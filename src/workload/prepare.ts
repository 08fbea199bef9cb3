import { createHash, type Hash } from 'node:crypto'
import type { ChatText, EngineTokenizer, TokenizerProbe } from '../client/tokenize.ts'
import { ServegateError } from '../errors.ts'
import type { Api } from '../schema/run.ts'
import { bodyExtras, type BodyExtras, type ChatContent, requestJson } from './body.ts'
import { bodyEntry, updateStreamEntry } from './bytes.ts'
import { canaryInstruction, canaryMarker } from './canary.ts'
import { datasetUserContent, loadDataset, type LoadedDataset, type ResolvedRow } from './dataset.ts'
import { type ResolvedWorkloadSpec, WorkloadSpec } from './workload-spec.ts'
import { codeSource, proseSource, type TextSource } from './text.ts'

/** How planned tokens become text where no engine tokenizer answers. */
export const ESTIMATED_TOKENS_PER_WORD = 1.3

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
}

/** What judging a reply needs of its request once the body is sent. */
export type PlannedRequest = Omit<PreparedRequest, 'body'>

export interface Calibration {
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
}

/** A measured request's own size, where a replayed trace dictates it. */
export interface PlannedSize {
  promptTokens: number
  maxTokens: number
}

export interface PreparePlan {
  api: Api
  maxTokens: number
  requests: number
  warmupRequests: number
  /**
   * Per measured request (index i), its prompt tokens and `max_tokens`, replacing the spec's
   * `promptTokens` and the plan's `maxTokens`; warm-up requests keep those. @default null
   */
  sizes?: readonly PlannedSize[] | null
}

const TASKS: Record<Exclude<ResolvedWorkloadSpec['kind'], 'dataset'>, string> = {
  'synthetic-summary': 'Summarize the notes above in three sentences.',
  'synthetic-repeated-code': 'Describe what the code above does in a few sentences.',
  'shared-prefix': 'Summarize the notes above in three sentences.',
}

/** ±0.5% or ±8 tokens, whichever is larger. */
export function calibrationTolerance(target: number): number {
  return Math.max(8, Math.ceil(target * 0.005))
}

interface Fit {
  pieces: number
  tokens: number
}

/**
 * Finds the number of text pieces whose prompt the engine counts closest to `target` tokens:
 * secant steps on a monotone count, stopping at the exact count or when a step would revisit
 * a size already tried (a handful of tokenizer calls per request). The caller judges the
 * result against its tolerance.
 */
export async function fitPieces(count: (pieces: number) => Promise<number>, target: number, start: number): Promise<Fit> {
  const tried = new Map<number, number>()
  const measure = async (pieces: number): Promise<Fit> => {
    const tokens = tried.get(pieces) ?? (await count(pieces))
    tried.set(pieces, tokens)
    return { pieces, tokens }
  }
  let fit = await measure(Math.max(1, start))
  let best = fit
  let previous: Fit | null = null
  for (let i = 0; i < 24 && fit.tokens !== target; i++) {
    const slope =
      previous !== null && previous.pieces !== fit.pieces
        ? (fit.tokens - previous.tokens) / (fit.pieces - previous.pieces)
        : fit.tokens / fit.pieces
    const bounded = Math.min(8, Math.max(0.2, Number.isFinite(slope) ? slope : 1))
    let step = Math.round((target - fit.tokens) / bounded)
    if (step === 0) step = Math.sign(target - fit.tokens)
    const pieces = Math.max(1, fit.pieces + step)
    if (tried.has(pieces)) {
      // Converged to a bracket: the closest neighbour one piece away is the last candidate.
      const neighbour = Math.max(1, fit.pieces + Math.sign(target - fit.tokens))
      if (tried.has(neighbour)) break
      previous = fit
      fit = await measure(neighbour)
    } else {
      previous = fit
      fit = await measure(pieces)
    }
    if (Math.abs(fit.tokens - target) < Math.abs(best.tokens - target)) best = fit
  }
  return best
}

function source(spec: ResolvedWorkloadSpec, stream: number): TextSource {
  return spec.kind === 'synthetic-repeated-code' ? codeSource(spec.seed, stream) : proseSource(spec.seed, stream)
}

/** Stream ids: request i reads text stream i + 1; stream 0 is the shared block. */
const SHARED_STREAM = 0

/**
 * The prompt text of request `index`: the shared block (shared prefix), a per-request header
 * (so no two prompts share more than the shared block), the body — `pieces` pieces of
 * generated text, or the dataset row's prompt — then the canary instruction and the task.
 */
function promptText(spec: ResolvedWorkloadSpec, shared: string | null, index: number, pieces: number, row: ResolvedRow | null): string {
  const body = row !== null ? row.prompt : source(spec, index + 1).take(pieces)
  const canary = spec.canaries ? canaryInstruction(canaryMarker(spec.seed, index)) : null
  const task = spec.kind === 'dataset' ? null : TASKS[spec.kind]
  const tail = [canary, task].filter((t) => t !== null).join(' ')
  return [shared, `Request ${spec.seed}-${index}.`, body, tail].filter((p) => p !== null && p !== '').join('\n\n')
}

function contentOf(prompt: string, row: ResolvedRow | null): ChatContent {
  return row === null ? prompt : datasetUserContent({ ...row, prompt })
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
  const extras = bodyExtras(plan.api, plan.maxTokens, spec.sampling, spec.outputControl)
  const total = plan.requests + plan.warmupRequests

  let dataset: LoadedDataset | null = null
  if (spec.kind === 'dataset') {
    if (spec.datasetPath === undefined)
      throw new ServegateError('CONFIG_INVALID', 'workload.datasetPath: the dataset kind needs a JSONL file; pass --dataset FILE')
    dataset = await loadDataset(spec.datasetPath)
    if (plan.api !== 'chat' && dataset.rows.some((r) => r.images.length > 0)) {
      throw new ServegateError('CONFIG_INVALID', 'api: dataset rows with images need the chat API; pass --api chat')
    }
  }
  const sharedTokens =
    spec.prefixCache.mode === 'shared' ? spec.prefixCache.tokens : spec.kind === 'shared-prefix' ? Math.floor(spec.promptTokens / 2) : 0
  if (sharedTokens >= spec.promptTokens) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `workload.prefixCache.tokens: ${sharedTokens} shared tokens leave no room in a ${spec.promptTokens}-token prompt; ` +
        'make it smaller than promptTokens',
    )
  }

  const sizeOf = (index: number): PlannedSize => plan.sizes?.[index] ?? { promptTokens: spec.promptTokens, maxTokens: plan.maxTokens }
  const tokenizer: EngineTokenizer | null = probe?.tokenizer ?? null
  let warning = probe?.warning ?? (tokenizer === null ? 'no tokenizer was probed; prompt sizes are estimated' : null)
  const countPrompt = async (prompt: string): Promise<number> => {
    if (tokenizer === null) throw new Error('no tokenizer')
    const messages: ChatText[] = [{ role: 'user', content: prompt }]
    return plan.api === 'chat' ? tokenizer.countChat(messages) : tokenizer.countText(prompt)
  }

  let shared: string | null = null
  let sharedPrefixTokens: number | null = null
  let useTokenizer = tokenizer !== null
  if (sharedTokens > 0) {
    const sharedText = (pieces: number) => source(spec, SHARED_STREAM).take(pieces)
    if (useTokenizer) {
      try {
        const fit = await fitPieces(
          async (p) => (tokenizer as EngineTokenizer).countText(sharedText(p)),
          sharedTokens,
          Math.round(sharedTokens / ESTIMATED_TOKENS_PER_WORD),
        )
        shared = sharedText(fit.pieces)
        sharedPrefixTokens = fit.tokens
      } catch (err) {
        useTokenizer = false
        warning = `the engine's tokenizer failed during calibration (${(err as Error).message}); prompt sizes are estimated`
      }
    }
    if (shared === null) shared = sharedText(Math.round(sharedTokens / ESTIMATED_TOKENS_PER_WORD))
  }

  // Calibrated sizes are fitted for every request before anything is sent (the tokenizer is the
  // engine's, and must not share it with the load), and kept as two numbers a request; without a
  // tokenizer the size is estimated from the index alone when the body is built.
  const fitted = useTokenizer ? new Int32Array(total) : null
  const plannedTokens = useTokenizer ? new Float64Array(total).fill(Number.NaN) : null
  const rowOf = (index: number): ResolvedRow | null =>
    dataset === null ? null : (dataset.rows[index % dataset.rows.length] as ResolvedRow)
  const estimateOf = (index: number, size: PlannedSize): number => {
    const fixedTokens = Math.round(promptText(spec, shared, index, 0, null).split(/\s+/).length * ESTIMATED_TOKENS_PER_WORD)
    return Math.max(1, Math.round((size.promptTokens - fixedTokens) / ESTIMATED_TOKENS_PER_WORD))
  }
  let outsideTolerance = 0
  if (fitted !== null && plannedTokens !== null) {
    let last: { pieces: number; target: number } | null = null
    for (let index = 0; index < total; index++) {
      if (signal?.aborted === true) throw new ServegateError('REQUEST_ABORTED', `calibration aborted at request ${index} of ${total}`)
      const row = rowOf(index)
      const size = sizeOf(index)
      let pieces = 0
      let planned: number | null = null
      if (row === null) {
        const estimate = estimateOf(index, size)
        // The previous request's fit is the best start when the targets match (every request but a trace's).
        pieces = last !== null && last.target === size.promptTokens ? last.pieces : estimate
        if (useTokenizer) {
          try {
            const fit = await fitPieces((p) => countPrompt(promptText(spec, shared, index, p, null)), size.promptTokens, pieces)
            pieces = fit.pieces
            planned = fit.tokens
            last = { pieces: fit.pieces, target: size.promptTokens }
            if (Math.abs(fit.tokens - size.promptTokens) > calibrationTolerance(size.promptTokens)) outsideTolerance++
          } catch (err) {
            useTokenizer = false
            pieces = estimate
            warning =
              `the engine's tokenizer failed during calibration (${(err as Error).message}); ` +
              `prompt sizes are estimated from request ${index} on`
          }
        }
      } else if (useTokenizer) {
        try {
          planned = await countPrompt(promptText(spec, shared, index, 0, row))
        } catch {
          planned = null
        }
      }
      fitted[index] = pieces
      if (planned !== null) plannedTokens[index] = planned
    }
  }

  const planned = (index: number): PlannedRequest => {
    if (!Number.isInteger(index) || index < 0 || index >= total) throw new RangeError(`request ${index} is not in this plan`)
    const tokens = plannedTokens?.[index]
    return {
      plannedPromptTokens: tokens === undefined || Number.isNaN(tokens) ? null : tokens,
      maxTokens: sizeOf(index).maxTokens,
      canaryMarker: spec.canaries ? canaryMarker(spec.seed, index) : null,
      row: rowOf(index),
    }
  }
  const request = (index: number): PreparedRequest => {
    const p = planned(index)
    const size = sizeOf(index)
    const pieces = p.row !== null ? 0 : fitted !== null ? (fitted[index] as number) : estimateOf(index, size)
    const prompt = promptText(spec, shared, index, pieces, p.row)
    const ownExtras = size.maxTokens === plan.maxTokens ? extras : bodyExtras(plan.api, size.maxTokens, spec.sampling, spec.outputControl)
    return { body: requestJson(plan.api, contentOf(prompt, p.row), size.maxTokens, ownExtras), ...p }
  }

  // Per-request sizes (a trace): the record states their mean; each request was held to its own tolerance.
  const target = plan.sizes
    ? Math.round(plan.sizes.reduce((s, x) => s + x.promptTokens, 0) / Math.max(1, plan.sizes.length))
    : spec.promptTokens
  const method = spec.kind === 'dataset' ? 'none' : tokenizer !== null && warning === null ? 'engine-tokenizer' : 'estimate'
  return {
    spec,
    api: plan.api,
    maxTokens: plan.maxTokens,
    measuredCount: plan.requests,
    warmupCount: plan.warmupRequests,
    request,
    planned,
    calibration: {
      method,
      tokenizer: tokenizer?.description ?? null,
      targetTokens: target,
      toleranceTokens: calibrationTolerance(target),
      outsideTolerance,
      warning: spec.kind === 'dataset' && warning !== null ? `${warning} (dataset prompts are not resized)` : warning,
      sharedPrefixTokens,
    },
    extras,
    dataset: dataset === null ? null : { path: dataset.path, sha256: dataset.sha256, rows: dataset.rows.length },
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
  const key = JSON.stringify([resolveWorkloadSpec(input), plan])
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
