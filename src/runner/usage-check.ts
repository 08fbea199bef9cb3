import type { StreamObservation } from '../client/observation.ts'
import type { TokenizerProbe } from '../client/tokenize.ts'
import { RETOKENIZE_TOLERANCE, type RequestRecord, type UsageCheckPlan } from '../schema/run.ts'
import type { ResolvedRunCellOptions } from './cell-options.ts'

/** A cell's usage check with its defaults filled. */
type UsageRule = ResolvedRunCellOptions['usageCheck']

/**
 * What a cell holds for its tokenizer pass, bytes: the replies' streamed text (a character a
 * byte) and what each held reply keeps alive until the pass (its timings, `hold`'s `keeps`).
 * Replies past it are judged on the chunk bound alone.
 */
export const HELD_BYTES = 16 * 1024 * 1024

/** Tokenizer calls in flight at once in the pass after the measured requests. */
const RETOKENIZE_CONCURRENCY = 4

/** How one reply's usage was judged: the rule, the tokenizer's count, and what is wrong (null when nothing is). */
export interface UsageVerdict {
  rule: RequestRecord['usageRule']
  retokenized: number | null
  problem: string | null
}

/** No usage reported: nothing to judge. */
export const NO_USAGE: UsageVerdict = { rule: null, retokenized: null, problem: null }

/** A count a server reported, said as it came: `−5`, `1.5`, or that it was not a number. */
function said(value: number): string {
  return Number.isNaN(value) ? 'not a number' : String(value)
}

/** What is wrong with a count as a token count, or null when it is a non-negative integer. */
function countProblem(field: string, value: number | null): string | null {
  if (value === null || (Number.isSafeInteger(value) && value >= 0)) return null
  return `usage.${field} is ${said(value)}, not a non-negative integer`
}

/**
 * The first look at a finished reply's usage, as it ends: both counts must be non-negative
 * integers, and the completion count at least 1 and at most `maxTokensPerChunk` per streamed
 * chunk that carried text. Null when the server reported no completion count or nothing streamed
 * (the record then counts chunks itself).
 * @example screenUsage({ ...obs, usageCompletionTokens: 500, outputChunkAt: new Float64Array(10) }, 16)
 * // 'usage.completion_tokens is 500 for 10 streamed chunks, more than 16 a chunk (usageCheck.maxTokensPerChunk)'
 */
export function screenUsage(
  obs: Pick<StreamObservation, 'usagePromptTokens' | 'usageCompletionTokens' | 'outputChunkAt'>,
  maxTokensPerChunk: number,
): string | null {
  const typed = countProblem('prompt_tokens', obs.usagePromptTokens) ?? countProblem('completion_tokens', obs.usageCompletionTokens)
  if (typed !== null) return typed
  const reported = obs.usageCompletionTokens
  const chunks = obs.outputChunkAt.length
  if (reported === null || chunks === 0) return null
  if (reported === 0) return `usage.completion_tokens is 0, but ${chunks} chunks streamed text`
  if (reported > chunks * maxTokensPerChunk) {
    return (
      `usage.completion_tokens is ${reported} for ${chunks} streamed chunks, more than ${maxTokensPerChunk} a chunk ` +
      '(usageCheck.maxTokensPerChunk)'
    )
  }
  return null
}

/** Whether a reported count agrees with the tokenizer's count of the streamed text; the problem when not. */
export function retokenizedProblem(reported: number, retokenized: number): string | null {
  const allowed = RETOKENIZE_TOLERANCE.tokens + Math.ceil(RETOKENIZE_TOLERANCE.share * retokenized)
  if (Math.abs(reported - retokenized) <= allowed) return null
  return (
    `usage.completion_tokens is ${reported}, but the engine's tokenizer counts ${retokenized} tokens in the streamed text ` +
    `(allowed: ±${allowed})`
  )
}

/** A reply held for the tokenizer pass: its index and the text it streamed. */
interface Held {
  index: number
  text: string
}

/**
 * A cell's usage cross-check (docs/metrics.md): every reply is screened as it ends
 * ({@link screenUsage}); where the engine has a tokenizer endpoint, the replies that pass are
 * held with their streamed text, and after the measured requests (never during them) each text
 * is counted once and compared with the reported count. Past {@link HELD_BYTES} held (their text
 * and what each keeps alive), replies are judged on the chunk bound alone, and their records say so.
 * @example
 * const check = await UsageCrossCheck.start(o.usageCheck, () => transport.tokenizer())
 * if (check.hold(index, obs.streamedText)) … // later: for (const [i, v] of await check.settle()) …
 */
export class UsageCrossCheck {
  readonly #rule: UsageRule
  readonly #count: ((text: string) => Promise<number>) | null
  readonly #tokenizer: string | null
  #held: Held[] = []
  #heldBytes = 0

  private constructor(rule: UsageRule, count: ((text: string) => Promise<number>) | null, tokenizer: string | null) {
    this.#rule = rule
    this.#count = count
    this.#tokenizer = tokenizer
  }

  /**
   * The check a cell runs: with `retokenize`, the engine's tokenizer is probed (before the
   * measured requests); its count of the empty text (a BOS token) is taken off every count.
   */
  static async start(rule: UsageRule, probe: () => Promise<TokenizerProbe | null>): Promise<UsageCrossCheck> {
    if (!rule.retokenize) return new UsageCrossCheck(rule, null, null)
    const found = (await probe())?.tokenizer ?? null
    if (found === null) return new UsageCrossCheck(rule, null, null)
    try {
      const special = await found.countText('')
      return new UsageCrossCheck(rule, async (text) => Math.max(0, (await found.countText(text)) - special), found.description)
    } catch {
      return new UsageCrossCheck(rule, null, null)
    }
  }

  /** A check with no tokenizer: the chunk bound alone. */
  static chunkBound(rule: UsageRule): UsageCrossCheck {
    return new UsageCrossCheck(rule, null, null)
  }

  /** Whether replies should keep their streamed text (there is a tokenizer to count it). */
  get keepsText(): boolean {
    return this.#count !== null
  }

  /** The check as the record states it. */
  get plan(): UsageCheckPlan {
    return {
      maxTokensPerChunk: this.#rule.maxTokensPerChunk,
      retokenize: this.#rule.retokenize,
      tokenizer: this.#tokenizer,
      toleranceTokens: RETOKENIZE_TOLERANCE.tokens,
      toleranceShare: RETOKENIZE_TOLERANCE.share,
    }
  }

  /** The verdict of a reply as it ends, before any tokenizer: null usage is nothing to judge. */
  screen(obs: StreamObservation): UsageVerdict {
    if (obs.usageCompletionTokens === null && obs.usagePromptTokens === null) return NO_USAGE
    const problem = screenUsage(obs, this.#rule.maxTokensPerChunk)
    return { rule: obs.usageCompletionTokens === null ? null : 'chunk-bound', retokenized: null, problem }
  }

  /**
   * Holds reply `index`'s streamed text for the tokenizer pass, the caller keeping `keeps` bytes
   * of its own alive for it until then (the reply's record is remade after the pass); false when
   * there is no tokenizer, no text, or the two would take the held bytes past {@link HELD_BYTES}
   * (the reply is then judged on the chunk bound).
   */
  hold(index: number, text: string | null, keeps = 0): boolean {
    if (this.#count === null || text === null || this.#heldBytes + text.length + keeps > HELD_BYTES) return false
    this.#held.push({ index, text })
    this.#heldBytes += text.length + keeps
    return true
  }

  /**
   * Counts every held text once (a few calls at a time) and judges each reply's reported count
   * against it; a count that failed (the engine gone) leaves that reply, and every later one, to
   * the chunk bound. Returns the tokenizer's count per held index (null where none was had).
   */
  async settle(): Promise<Map<number, number | null>> {
    const held = this.#held
    this.#held = []
    this.#heldBytes = 0
    const counts = new Map<number, number | null>()
    const count = this.#count
    if (count === null) return counts
    let broken = false
    let next = 0
    const lane = async (): Promise<void> => {
      while (next < held.length) {
        const item = held[next++] as Held
        if (broken) {
          counts.set(item.index, null)
          continue
        }
        try {
          counts.set(item.index, await count(item.text))
        } catch {
          broken = true
          counts.set(item.index, null)
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(RETOKENIZE_CONCURRENCY, held.length) }, lane))
    return counts
  }
}

/** A held reply's verdict from the tokenizer's count (null: it could not count, so the chunk bound decided). */
export function tokenizerVerdict(reported: number, retokenized: number | null): UsageVerdict {
  if (retokenized === null) return { rule: 'chunk-bound', retokenized: null, problem: null }
  return { rule: 'tokenizer', retokenized, problem: retokenizedProblem(reported, retokenized) }
}
