import type { EngineTokenizer, TokenizerProbe } from '../client/tokenize.ts'
import { ServegateError } from '../errors.ts'
import { createRandom, mixSeed } from '../random.ts'
import type { Api } from '../schema/run.ts'
import { bodyExtras, requestJson } from './body.ts'
import { canaryInstruction, canaryMarker } from './canary.ts'
import type { PlannedRequest, PlannedSize, PreparedWorkload, PreparePlan } from './prepare.ts'
import { calibrationTolerance } from './prompt-calibrator.ts'
import { ESTIMATED_TOKENS_PER_WORD } from './prompt-layout.ts'
import type { ResolvedWorkloadSpec } from './workload-spec.ts'

/**
 * The words block text is drawn from: short common words that tokenizers keep as one token each
 * (byte-pair vocabularies hold them with and without a leading space; the sim cuts words at four
 * characters). Calibration keeps only those the engine's own tokenizer counts as one token.
 */
export const BLOCK_WORDS: readonly string[] = (
  'the of and to in is it that for on was with as at by be this from or an are not but had his they have one ' +
  'you were her all she we him been has when who will more no if out so said what up its into than them can only ' +
  'new some time two may then do any my now such like our over man me even most made also did many must back ' +
  'much your way well down each just how too good very make work long get here both life same know last us old ' +
  'year off come go came used take'
).split(' ')

/** Fewer one-token words than this and block text would be too repetitive to trust: sizes are then estimated. */
const MIN_VOCABULARY = 16

/** Salts of the word streams: a block's own, and a request's own (words past its blocks, and warm-up prompts). */
const BLOCK_STREAM = 0x0b10c
const OWN_STREAM = 0x0e1f

/** What the prompt asks of the model after its blocks. */
const TASK = 'Summarize the notes above in three sentences.'

/** Words of a request's own text counted with its tail to measure the tail's tokens. */
const OVERHEAD_SAMPLE_WORDS = 32

/**
 * Block text: each `hash_ids` block is a run of words drawn from its own stream, a function of
 * (hash id, seed) alone, so the same id gives the same bytes in every request and on both arms; a
 * partial block is the first words of the full one. A request's own stream fills what its blocks
 * do not cover.
 * @example const w = new BlockWords(BLOCK_WORDS, 7); w.block(46, 512) === w.block(46, 512) // true
 */
export class BlockWords {
  readonly vocabulary: readonly string[]
  readonly #block: number
  readonly #own: number

  constructor(vocabulary: readonly string[], seed: number) {
    this.vocabulary = vocabulary
    this.#block = mixSeed(seed, BLOCK_STREAM)
    this.#own = mixSeed(seed, OWN_STREAM)
  }

  /** The first `count` words of block `hashId` (any safe integer), space-separated. */
  block(hashId: number, count: number): string {
    // A safe integer is its high and low 32-bit halves: both go into the stream's seed.
    return this.#take(mixSeed(mixSeed(this.#block, Math.floor(hashId / 2 ** 32)), hashId >>> 0), count)
  }

  /** `count` words of request `index`'s own text. */
  own(index: number, count: number): string {
    return this.#take(mixSeed(this.#own, index), count)
  }

  #take(seed: number, count: number): string {
    const random = createRandom(seed)
    const { vocabulary } = this
    const words = new Array<string>(count)
    for (let i = 0; i < count; i++) words[i] = vocabulary[Math.floor(random() * vocabulary.length)] as string
    return words.join(' ')
  }
}

/** What a trace's block prompts are planned from: the API, the request counts and the block size. */
export type TraceBlocksPlan = Pick<PreparePlan, 'api' | 'requests' | 'warmupRequests'> & { blockTokens: number }

/** Each request's size (a trace row's, or a warm-up's) and the plan's one `max_tokens` (`RequestSizes`). */
export interface TraceSizes {
  size(index: number): PlannedSize
  readonly maxTokens: number
}

/**
 * How a trace with `hash_ids` lays out each prompt: its blocks in order, `blockTokens` words each
 * (the last cut to what the request's size leaves), its own words where its blocks stop short,
 * then the canary instruction (if asked) and the task. Nothing request-specific comes before the
 * blocks, so two requests share exactly the bytes of their common leading blocks.
 */
class TraceBlockLayout {
  /** Measured and warm-up requests together. */
  readonly total: number
  readonly blockTokens: number
  readonly words: BlockWords
  readonly #spec: ResolvedWorkloadSpec
  readonly #size: (index: number) => PlannedSize

  /** @param size request `index`'s size: a measured request's from its trace row (with its `hashIds`), a warm-up's from the workload */
  constructor(spec: ResolvedWorkloadSpec, plan: TraceBlocksPlan, words: BlockWords, size: (index: number) => PlannedSize) {
    this.total = plan.requests + plan.warmupRequests
    this.blockTokens = plan.blockTokens
    this.words = words
    this.#spec = spec
    this.#size = size
  }

  size(index: number): PlannedSize {
    return this.#size(index)
  }

  /** What follows the blocks: the canary instruction (when asked) and the task. */
  tail(index: number): string {
    return this.#spec.canaries ? `${canaryInstruction(canaryMarker(this.#spec.seed, index))} ${TASK}` : TASK
  }

  /** Request `index`'s first `count` words: its blocks, in order, then its own words. */
  content(index: number, count: number): string {
    const ids = this.size(index).hashIds ?? []
    const parts: string[] = []
    let left = count
    for (let j = 0; j < ids.length && left > 0; j++) {
      const n = Math.min(this.blockTokens, left)
      parts.push(this.words.block(ids[j] as number, n))
      left -= n
    }
    if (left > 0) parts.push(this.words.own(index, left))
    return parts.join(' ')
  }

  /** Request `index`'s prompt with `count` words before its tail. */
  text(index: number, count: number): string {
    return count > 0 ? `${this.content(index, count)}\n\n${this.tail(index)}` : this.tail(index)
  }
}

/** The tokens a prompt carries besides its words (template, special tokens, tail): constant, or one per request. */
interface Overheads {
  of(index: number): number
}

/** How the block prompts were sized: exact (the engine's tokenizer counts every word as one token), or estimated. */
interface BlockSizing {
  layout: TraceBlockLayout
  overheads: Overheads
  /** Why the sizes are estimated; null when exact. */
  warning: string | null
  tokenizer: string | null
}

/** The engine's count of a prompt as the API sends it (chat: one user message, template included). */
function counter(tokenizer: EngineTokenizer, api: Api): (prompt: string) => Promise<number> {
  return api === 'chat' ? (prompt) => tokenizer.countChat([{ role: 'user', content: prompt }]) : (prompt) => tokenizer.countText(prompt)
}

/**
 * The block words the engine's tokenizer counts as one token each, with or without a space
 * before: the whole list in one call when every word is, else word by word.
 */
async function oneTokenWords(tokenizer: EngineTokenizer, base: number): Promise<string[]> {
  if ((await tokenizer.countText(BLOCK_WORDS.join(' '))) - base === BLOCK_WORDS.length) return [...BLOCK_WORDS]
  const kept: string[] = []
  for (const word of BLOCK_WORDS) if ((await tokenizer.countText(`${word} ${word}`)) - base === 2) kept.push(word)
  return kept
}

/** The first block id of the plan (the block the check counts), or 0 when none is found early. */
function firstBlockId(layout: TraceBlockLayout): number {
  for (let i = 0; i < layout.total; i++) {
    const ids = layout.size(i).hashIds
    if (ids !== null && ids !== undefined && ids.length > 0) return ids[0] as number
  }
  return 0
}

/**
 * Sizes block text with the engine's tokenizer, a fixed number of calls whatever the trace's
 * length: it keeps the words counted as one token, checks that a block of `blockTokens` words
 * and two blocks in a row count exactly that, and measures the tokens a prompt carries besides
 * its words (once; with canaries once per request, as markers tokenize differently). The reason
 * when a check fails: the caller then estimates, saying why.
 * @throws ServegateError REQUEST_ABORTED when `signal` aborts
 */
async function calibrateBlocks(
  tokenizer: EngineTokenizer,
  api: Api,
  { seed, canaries }: ResolvedWorkloadSpec,
  layoutOf: (words: BlockWords) => TraceBlockLayout,
  signal: AbortSignal | undefined,
): Promise<{ layout: TraceBlockLayout; overheads: Overheads } | { reason: string }> {
  const base = await tokenizer.countText('')
  const vocabulary = await oneTokenWords(tokenizer, base)
  if (vocabulary.length < MIN_VOCABULARY) {
    return { reason: `only ${vocabulary.length} of ${BLOCK_WORDS.length} block words are one token to the engine's tokenizer` }
  }
  const layout = layoutOf(new BlockWords(vocabulary, seed))
  const b = layout.blockTokens
  const id = firstBlockId(layout)
  const block = layout.words.block(id, b)
  const one = (await tokenizer.countText(block)) - base
  const two = (await tokenizer.countText(`${block} ${layout.words.own(0, b)}`)) - base
  if (one !== b || two !== 2 * b) {
    return {
      reason: `the engine's tokenizer counts a ${b}-word block as ${one} tokens and it with ${b} more words as ${two}, not ${b} and ${2 * b}`,
    }
  }
  const count = counter(tokenizer, api)
  const measure = async (index: number): Promise<number> => (await count(layout.text(index, OVERHEAD_SAMPLE_WORDS))) - OVERHEAD_SAMPLE_WORDS
  // Without canaries every request ends in the same tail: one measure holds for all.
  if (!canaries) {
    const overhead = await measure(0)
    return { layout, overheads: { of: () => overhead } }
  }
  // A canary marker's digits tokenize as they fall: each request's tail is measured.
  const each = new Int32Array(layout.total)
  for (let index = 0; index < layout.total; index++) {
    if (signal?.aborted === true) throw new ServegateError('REQUEST_ABORTED', `calibration aborted at request ${index} of ${layout.total}`)
    each[index] = await measure(index)
  }
  return { layout, overheads: { of: (index) => each[index] as number } }
}

/**
 * Plans a trace with `hash_ids`: each request's prompt is its blocks' text (`TraceBlockLayout`),
 * sized with the engine's tokenizer so every block is `blockTokens` tokens as the engine counts
 * them and the prompt is its row's `input_length`. Calibration costs a fixed number of tokenizer
 * calls (one more per request with canaries), and bodies are built only when sent, so a
 * 100,000-row trace plans at once. Without a usable tokenizer each word is taken as one token
 * and the record's warning says so.
 * @param sizes each request's size (`RequestSizes`): a trace row's, or a warm-up's
 * @throws ServegateError CONFIG_INVALID for a workload that brings its own prompt text or prefix
 */
export async function prepareTraceBlocks(
  spec: ResolvedWorkloadSpec,
  plan: TraceBlocksPlan,
  sizes: TraceSizes,
  probe: TokenizerProbe | null,
  signal?: AbortSignal,
): Promise<PreparedWorkload> {
  if (spec.kind !== 'synthetic-summary') {
    throw new ServegateError(
      'CONFIG_INVALID',
      `workload.kind: a trace with hash_ids builds each prompt from its blocks, not from ${spec.kind}; ` +
        "use kind 'synthetic-summary' (the default)",
    )
  }
  if (spec.prefixCache.mode === 'shared') {
    throw new ServegateError(
      'CONFIG_INVALID',
      "workload.prefixCache: a trace with hash_ids decides what requests share; remove prefixCache (or set mode 'unique')",
    )
  }
  const layoutOf = (words: BlockWords): TraceBlockLayout => new TraceBlockLayout(spec, plan, words, (index) => sizes.size(index))
  const sizing = await blockSizing(spec, plan.api, probe, layoutOf, signal)
  const { layout, overheads, warning } = sizing
  const exact = warning === null
  const words = (index: number): number => Math.max(0, layout.size(index).promptTokens - overheads.of(index))
  const planned = (index: number): PlannedRequest => {
    if (!Number.isInteger(index) || index < 0 || index >= layout.total) throw new RangeError(`request ${index} is not in this plan`)
    return {
      plannedPromptTokens: exact ? overheads.of(index) + words(index) : null,
      maxTokens: layout.size(index).maxTokens,
      canaryMarker: spec.canaries ? canaryMarker(spec.seed, index) : null,
      row: null,
      session: null,
      turn: null,
    }
  }
  const extras = bodyExtras(plan.api, sizes.maxTokens, spec.sampling, spec.outputControl)
  const body = (index: number, maxTokens: number): string => {
    const own = maxTokens === sizes.maxTokens ? extras : bodyExtras(plan.api, maxTokens, spec.sampling, spec.outputControl)
    return requestJson(plan.api, layout.text(index, words(index)), maxTokens, own)
  }
  let target = 0
  let outside = 0
  for (let i = 0; i < plan.requests; i++) {
    const want = layout.size(i).promptTokens
    target += want
    // A row shorter than the template and tail cannot be met: it is sent as short as it gets.
    if (exact && Math.abs(overheads.of(i) + words(i) - want) > calibrationTolerance(want)) outside++
  }
  target = Math.round(target / Math.max(1, plan.requests))
  return {
    spec,
    api: plan.api,
    maxTokens: sizes.maxTokens,
    measuredCount: plan.requests,
    warmupCount: plan.warmupRequests,
    request: (index) => {
      const p = planned(index)
      return { body: body(index, p.maxTokens), ...p }
    },
    planned,
    calibration: {
      method: exact ? 'engine-tokenizer' : 'estimate',
      tokenizer: sizing.tokenizer,
      targetTokens: target,
      toleranceTokens: calibrationTolerance(target),
      outsideTolerance: outside,
      warning,
      sharedPrefixTokens: null,
    },
    extras,
    dataset: null,
    conversation: null,
  }
}

/** The block words and overheads: calibrated with the engine's tokenizer where one answers, else estimated with the reason. */
async function blockSizing(
  spec: ResolvedWorkloadSpec,
  api: Api,
  probe: TokenizerProbe | null,
  layoutOf: (words: BlockWords) => TraceBlockLayout,
  signal: AbortSignal | undefined,
): Promise<BlockSizing> {
  const tokenizer = probe?.tokenizer ?? null
  let reason = probe?.warning ?? 'no tokenizer was probed'
  if (tokenizer !== null) {
    try {
      const calibrated = await calibrateBlocks(tokenizer, api, spec, layoutOf, signal)
      // A probe's warning (a chat template whose cost is unknown) leaves the blocks exact and the chat totals not.
      if ('layout' in calibrated)
        return { ...calibrated, warning: api === 'chat' ? (probe?.warning ?? null) : null, tokenizer: tokenizer.description }
      reason = calibrated.reason
    } catch (err) {
      if (err instanceof ServegateError && err.code === 'REQUEST_ABORTED') throw err
      reason = `the engine's tokenizer failed during calibration (${(err as Error).message})`
    }
  }
  const layout = layoutOf(new BlockWords(BLOCK_WORDS, spec.seed))
  const tailTokens = Math.round(layout.tail(0).split(' ').length * ESTIMATED_TOKENS_PER_WORD)
  return {
    layout,
    overheads: { of: () => tailTokens },
    warning: `${reason}; trace blocks are sized at an estimated one token per word`,
    tokenizer: tokenizer?.description ?? null,
  }
}
