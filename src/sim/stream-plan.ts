import { randomUUID } from 'node:crypto'
import { mixSeed } from '../random.ts'
import type { SimRequest } from './request-body.ts'
import type { FaultKind, ResolvedSimOptions } from './sim-options.ts'
import type { StreamPlan } from './sim-stream.ts'
import { createTokenSource } from './tokens.ts'

/** How many tokens a request will generate (without faults), and whether it stops at its limit. */
export function outputLength(opts: ResolvedSimOptions, parsed: SimRequest): { tokens: number; atLimit: boolean } {
  const request = opts.ignoreOutputKnobs ? { ...parsed, ignoreEos: false, minTokens: 0 } : parsed
  const limit = request.maxTokens ?? opts.maxModelLen - request.promptTokens
  const natural = request.ignoreEos ? limit : Math.max(request.minTokens, opts.outputTokens ?? limit)
  return { tokens: Math.min(limit, natural), atLimit: natural >= limit }
}

/** Decides length, reasoning split, fault and words of one accepted request. */
export function streamPlan(opts: ResolvedSimOptions, request: SimRequest, index: number, fault: FaultKind | null): StreamPlan {
  const length = outputLength(opts, request)
  const empty = fault === 'empty'
  const outputTokens = empty ? 0 : length.tokens
  const api = request.api
  return {
    header: {
      api,
      id: `${api === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`,
      created: Math.floor(Date.now() / 1000),
      model: opts.model,
    },
    promptTokens: request.promptTokens,
    outputTokens,
    reasoningTokens: api === 'chat' ? Math.min(opts.reasoningTokens, outputTokens) : 0,
    finishReason: !empty && length.atLimit ? 'length' : 'stop',
    includeUsage: request.includeUsage,
    reportCachedTokens: opts.reportCachedTokens && opts.prefixCacheTokens > 0,
    keepContent: opts.prefixCacheTokens > 0,
    tokensPerChunk: opts.tokensPerChunk,
    fault: fault === 'drop' || fault === 'malformed' || fault === 'stall' ? fault : null,
    usageLie: fault === 'usage-negative' || fault === 'usage-huge' || fault === 'usage-inflated' ? fault : null,
    eol: opts.crlf ? '\r\n' : '\n',
    keepaliveMs: opts.keepaliveMs,
    leadContent: leadContent(request.promptText, fault === 'cross'),
    // A request's own seed fixes its words (as sampling with a seed would); otherwise the arrival index does.
    nextToken: createTokenSource(request.seed === null ? mixSeed(opts.seed, index + 1) : mixSeed(request.seed, 0)),
  }
}

const MARKER_INSTRUCTION = /reply with the exact marker ([A-Za-z0-9_-]+)/i
const ARITHMETIC = /What is (-?\d+) ([+×*x-]) (-?\d+)\?/

/**
 * What a compliant model would put first: the marker the prompt asks the reply to start with
 * (under the `cross` fault, a neighbouring request's marker instead, as an engine that mixes up
 * concurrent streams would), then the answer to a simple arithmetic question.
 */
function leadContent(promptText: string, cross: boolean): string[] {
  const lead: string[] = []
  const marker = MARKER_INSTRUCTION.exec(promptText)?.[1]
  if (marker !== undefined) lead.push(cross ? crossedMarker(marker) : marker)
  const sum = ARITHMETIC.exec(promptText)
  if (sum !== null) {
    const [a, b] = [Number(sum[1]), Number(sum[3])]
    const answer = sum[2] === '+' ? a + b : sum[2] === '-' ? a - b : a * b
    lead.push(` ${answer}`)
  }
  return lead
}

/** The marker of the next request: the last digit group plus one. */
function crossedMarker(marker: string): string {
  return marker.replace(/(\d+)$/, (digits) => String(Number(digits) + 1).padStart(digits.length, '0'))
}

/** A 400 for a request whose KV reservation exceeds the whole budget (it could never be admitted); null when it fits. */
export function kvOverflow(promptTokens: number, outputTokens: number, kvBudgetTokens: number | null): string | null {
  const needed = promptTokens + outputTokens
  if (kvBudgetTokens === null || needed <= kvBudgetTokens) return null
  return (
    `This request needs ${needed} KV tokens (${promptTokens} prompt + ${outputTokens} output) ` +
    `but the KV budget is ${kvBudgetTokens} tokens; it could never be scheduled. Reduce the prompt or max_tokens.`
  )
}

/** vLLM's 400 when prompt plus requested output exceed the context window; null when it fits. */
export function contextOverflow(request: SimRequest, maxModelLen: number): string | null {
  const requested = request.promptTokens + (request.maxTokens ?? 1)
  if (requested <= maxModelLen) return null
  return (
    `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${requested} tokens ` +
    `(${request.promptTokens} in the messages, ${request.maxTokens ?? 1} in the completion). ` +
    'Please reduce the length of the messages or completion.'
  )
}
