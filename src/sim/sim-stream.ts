import type { ServerResponse } from 'node:http'
import type { EngineJob } from './scheduler.ts'
import type { FaultKind } from './sim-options.ts'
import {
  chatChunk,
  completionChunk,
  dataEvent,
  doneEvent,
  keepaliveEvent,
  malformedEvent,
  usageChunk,
  type ChatDelta,
  type ChunkHeader,
  type Eol,
} from './chunks.ts'

/** Everything one streamed response needs, decided before it starts. */
export interface StreamPlan {
  header: ChunkHeader
  promptTokens: number
  /** Tokens to generate (0 for the `empty` fault). */
  outputTokens: number
  /** Leading tokens sent as reasoning (chat only; 0 for completions). */
  reasoningTokens: number
  finishReason: 'stop' | 'length'
  includeUsage: boolean
  /** Report the prompt tokens the prefix cache held as `usage.prompt_tokens_details.cached_tokens`. */
  reportCachedTokens: boolean
  /** Keep the content it streams (`SimStream.content`), which a prefix cache then holds after the prompt. */
  keepContent: boolean
  tokensPerChunk: number
  /** Only the faults that act inside a stream. */
  fault: Extract<FaultKind, 'drop' | 'malformed' | 'stall'> | null
  /** The lie the usage chunk tells about the completion tokens, if any. */
  usageLie: Extract<FaultKind, 'usage-negative' | 'usage-huge' | 'usage-inflated'> | null
  eol: Eol
  keepaliveMs: number | null
  /** Content tokens sent before the generated words (an echoed marker, an answer). */
  leadContent: string[]
  nextToken: () => string
}

/** What a usage chunk reports for `emitted` tokens: the truth, or the planned lie. */
function reportedCompletion(emitted: number, lie: StreamPlan['usageLie']): number {
  switch (lie) {
    case 'usage-negative':
      return -5
    case 'usage-huge':
      return 1e12
    case 'usage-inflated':
      return emitted * 50
    default:
      return emitted
  }
}

/** Tokens a `malformed` or `stall` fault lets through first. */
const FAULT_AFTER_TOKENS = 3

type TokenKind = 'reasoning' | 'content'

/**
 * One SSE response driven by the engine: the role chunk on `open()`, then tokens as the engine
 * steps it, buffered into chunks of `tokensPerChunk` (a reasoning→content switch flushes early),
 * the finish chunk, usage and `[DONE]`. Nothing is written after the client goes away.
 */
export class SimStream implements EngineJob {
  readonly promptTokens: number
  readonly reservedTokens: number
  readonly #res: ServerResponse
  readonly #plan: StreamPlan
  readonly #onEnd: (emittedTokens: number, complete: boolean) => void
  #emitted = 0
  #pending: string[] = []
  #pendingKind: TokenKind = 'content'
  #faultAt: number
  #keepalive: NodeJS.Timeout | null = null
  #ended = false
  #cachedTokens: number | null = null
  #content = ''

  constructor(res: ServerResponse, plan: StreamPlan, onEnd: (emittedTokens: number, complete: boolean) => void) {
    this.promptTokens = plan.promptTokens
    this.reservedTokens = plan.promptTokens + plan.outputTokens
    this.#res = res
    this.#plan = plan
    this.#onEnd = onEnd
    const n = plan.outputTokens
    this.#faultAt = plan.fault === 'drop' ? Math.floor(n / 2) : plan.fault ? Math.min(FAULT_AFTER_TOKENS, Math.max(0, n - 1)) : -1
  }

  /** Sends the headers and, for chat, the role chunk (vLLM sends it on accept, before prefill). */
  open(): void {
    this.#res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    if (this.#plan.header.api === 'chat') this.#writeChunk({ role: 'assistant', content: '' }, '', null)
    else this.#res.flushHeaders()
    if (this.#plan.keepaliveMs !== null) {
      this.#keepalive = setTimeout(() => this.#write(keepaliveEvent(this.#plan.eol)), this.#plan.keepaliveMs)
    }
  }

  step(): boolean {
    if (this.#ended) return false
    const n = this.#plan.outputTokens
    if (this.#emitted === 0 && !this.#checkFault()) return false
    if (this.#emitted < n) {
      this.#emitToken()
      if (this.#emitted < n && !this.#checkFault()) return false
    }
    if (this.#emitted < n) return true
    this.#finish()
    return false
  }

  /** The content it streamed so far (reasoning left out), where its plan keeps it; '' otherwise. */
  get content(): string {
    return this.#content
  }

  /** Its prefill found `tokens` of its prompt in the prefix cache (what its usage reports, when it reports it). */
  prefixCached(tokens: number): void {
    this.#cachedTokens = tokens
  }

  /** Stops everything after the client or the server closed the connection (`complete`: after `[DONE]` was written). */
  dispose(complete = false): void {
    if (this.#ended) return
    this.#ended = true
    this.#stopKeepalive()
    this.#onEnd(this.#emitted, complete)
  }

  #emitToken(): void {
    const kind: TokenKind = this.#emitted < this.#plan.reasoningTokens ? 'reasoning' : 'content'
    if (this.#pending.length > 0 && kind !== this.#pendingKind) this.#flush(null)
    const lead = kind === 'content' ? this.#plan.leadContent.shift() : undefined
    const token = lead ?? this.#plan.nextToken()
    if (kind === 'content' && this.#plan.keepContent) this.#content += token
    this.#pending.push(token)
    this.#pendingKind = kind
    this.#emitted++
    // The last chunk waits for `#finish`, which sends it with the finish reason.
    if (this.#pending.length >= this.#plan.tokensPerChunk && this.#emitted < this.#plan.outputTokens) this.#flush(null)
  }

  /** Applies the stream fault when its point is reached; false when the stream stops stepping. */
  #checkFault(): boolean {
    if (this.#emitted !== this.#faultAt) return true
    this.#faultAt = -1
    this.#flush(null)
    switch (this.#plan.fault) {
      case 'drop': {
        const socket = this.#res.socket
        this.dispose()
        // destroySoon lets the tokens already written reach the client, then closes with no terminating chunk.
        if (socket) socket.destroySoon()
        else this.#res.destroy()
        return false
      }
      case 'malformed':
        this.#write(malformedEvent(this.#plan.eol))
        return true
      case 'stall':
        // Silent from here on: keep-alives would hide the stall from a client's idle timeout.
        this.#stopKeepalive()
        return false
      default:
        return true
    }
  }

  #flush(finishReason: string | null): void {
    if (this.#pending.length === 0 && finishReason === null) return
    this.#writeChunk(this.#deltaOf(this.#pendingKind, this.#pending.join('')), this.#pending.join(''), finishReason)
    this.#pending = []
  }

  #deltaOf(kind: TokenKind, text: string): ChatDelta {
    if (text === '') return {}
    return kind === 'reasoning' ? { reasoning_content: text } : { content: text }
  }

  #writeChunk(delta: ChatDelta, text: string, finishReason: string | null): void {
    const { header, eol } = this.#plan
    const json = header.api === 'chat' ? chatChunk(header, delta, finishReason) : completionChunk(header, text, finishReason)
    this.#write(dataEvent(json, eol))
  }

  #finish(): void {
    const { header, eol, includeUsage, promptTokens, finishReason } = this.#plan
    this.#flush(finishReason)
    if (includeUsage) {
      const completion = reportedCompletion(this.#emitted, this.#plan.usageLie)
      const cached = this.#plan.reportCachedTokens ? this.#cachedTokens : null
      const usage = {
        prompt_tokens: promptTokens,
        completion_tokens: completion,
        total_tokens: promptTokens + completion,
        ...(cached === null ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
      }
      this.#write(dataEvent(usageChunk(header, usage), eol))
    }
    const complete = !this.#ended && !this.#res.destroyed && !this.#res.writableEnded
    this.#write(doneEvent(eol))
    if (!this.#ended) this.#res.end()
    this.dispose(complete)
  }

  #write(text: string): void {
    if (this.#ended || this.#res.destroyed || this.#res.writableEnded) return
    this.#res.write(text)
    this.#keepalive?.refresh()
  }

  #stopKeepalive(): void {
    if (this.#keepalive) clearTimeout(this.#keepalive)
    this.#keepalive = null
  }
}
