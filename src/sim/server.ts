import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { ServegateError } from '../errors.ts'
import { createEngine } from './scheduler.ts'
import { createFaultPlan } from './faults.ts'
import { FAULT_KINDS, resolveSimOptions, type FaultKind, type ResolvedSimOptions, type SimOptions } from './sim-options.ts'
import { mixSeed } from '../random.ts'
import { metricsRoute, renderMetrics, type SimCounters, versionRoutes } from './metrics.ts'
import { parseCompletionRequest, parseTokenizeRequest, type SimRequest } from './request-body.ts'
import { errorBody, type SimApi } from './chunks.ts'
import { SimStream, type StreamPlan } from './sim-stream.ts'
import { createTokenSource } from './tokens.ts'

/** Counters of a running simulated engine. */
export interface SimStats {
  /** `POST /tokenize` calls answered. */
  tokenizeRequests: number
  /** Completion requests accepted for serving (valid body, right model), faulted ones included. */
  requests: number
  /** Streams open now (queued, prefilling, decoding or stalled). */
  active: number
  /** The most streams open at once. */
  maxActive: number
  /** TCP connections the server has accepted so far. */
  connectionsAccepted: number
  /** The most streams in the decode batch at once. */
  maxRunning: number
  /** Streams waiting for admission now (capacity model: a seat or KV room). */
  queued: number
  /** The most streams that waited for admission at once. */
  maxQueued: number
  /** Faults injected so far, by kind. */
  faultsInjected: Record<FaultKind, number>
  /** Streams without a fault that the server wrote to the end (`[DONE]` included): each one a client must count as ok. */
  cleanCompletions: number
}

/** A running simulated engine. */
export interface SimServer {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:8000`; append `/v1/...`. */
  url: string
  port: number
  stats(): SimStats
  /** Stops listening, ends every open connection and cancels every timer. Idempotent. */
  close(): Promise<void>
}

/** Request bodies above this are answered 413; the largest real prompts are a few MiB. */
const MAX_BODY_BYTES = 64 * 1024 * 1024

const ROUTES: Record<string, { method: 'GET' | 'POST'; api?: SimApi }> = {
  '/health': { method: 'GET' },
  '/v1/models': { method: 'GET' },
  '/metrics': { method: 'GET' },
  '/prometheus/metrics': { method: 'GET' },
  '/version': { method: 'GET' },
  '/server_info': { method: 'GET' },
  '/get_server_info': { method: 'GET' },
  '/props': { method: 'GET' },
  '/tokenize': { method: 'POST' },
  '/v1/chat/completions': { method: 'POST', api: 'chat' },
  '/v1/completions': { method: 'POST', api: 'completions' },
}

/**
 * Starts the simulated OpenAI-compatible engine on a loopback port. Only streaming requests
 * (`"stream": true`) are served; a non-streaming completion request gets a 400. Endpoints:
 * `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, `GET /health`, and
 * vLLM's `POST /tokenize` (the sim's tokenizer: one token per whitespace-separated word).
 * @throws ServegateError `CONFIG_INVALID` for bad options (a non-loopback `host` included) or a
 *   port already in use.
 * @example
 * const sim = await startSimServer({ decodeTokPerS: 100, faults: [{ kind: 'http429', requests: [0] }] })
 * await fetch(`${sim.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }],
 * max_tokens: 8, stream: true }) })
 * await sim.close()
 */
export async function startSimServer(options: SimOptions = {}): Promise<SimServer> {
  const opts = resolveSimOptions(options)
  // SGLang's scheduler publishes its gauges at a prefill (counting the batch already decoding)
  // and every --decode-log-interval decode steps; between those a scrape reads the last values.
  const published = { running: 0, waiting: 0, kvUsage: 0 }
  const publish = (running: number): void => {
    published.running = running
    published.waiting = Math.max(0, streams.size - engine.running())
    published.kvUsage = kvUsageNow()
  }
  const hooks =
    opts.dialect === 'sglang'
      ? {
          onPrefill: (running: number) => publish(running),
          onStep: (step: number, batchSize: number) => {
            if (step % opts.decodeLogInterval === 0) publish(batchSize)
          },
        }
      : {}
  const engine = createEngine(opts, undefined, hooks)
  const kvUsageNow = (): number =>
    opts.kvBudgetTokens === null ? Math.min(1, engine.running() / 64) : engine.reservedTokens() / opts.kvBudgetTokens
  const faultPlan = createFaultPlan(opts)
  const streams = new Set<SimStream>()
  const faultsInjected = Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as Record<FaultKind, number>
  let requests = 0
  let promptTokens = 0
  let generationTokens = 0
  let requestsFinished = 0
  let cleanCompletions = 0
  const timings = { count: 0, ttftSecondsSum: 0, prefillSecondsSum: 0, decodeSecondsSum: 0 }
  let tokenizeRequests = 0
  let maxActive = 0
  let connectionsAccepted = 0
  let closing: Promise<void> | null = null
  const startedS = Math.floor(Date.now() / 1000)

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      sendError(res, 500, `sim internal error: ${error instanceof Error ? error.message : String(error)}`)
    })
  })

  server.on('connection', () => connectionsAccepted++)

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.socket.setNoDelay(true)
    const path = new URL(req.url ?? '/', 'http://sim.invalid').pathname
    const route = ROUTES[path]
    if (!route) {
      sendError(res, 404, `no route ${req.method ?? ''} ${path}; the sim serves ${Object.keys(ROUTES).join(', ')}`)
      return
    }
    if (req.method !== route.method) {
      sendError(res, 405, `${path} takes ${route.method}, not ${req.method ?? ''}`)
      return
    }
    if (path === '/health') {
      res.writeHead(200, { 'content-length': 0 }).end()
      return
    }
    if (path === '/metrics' || path === '/prometheus/metrics') {
      // TensorRT-LLM mounts /prometheus/metrics only with return_perf_metrics; its /metrics is JSON iteration stats.
      if (path !== metricsRoute(opts.dialect) || (opts.dialect === 'trtllm' && !opts.perfMetrics)) {
        return opts.dialect === 'trtllm' && path === '/metrics' ? sendJson(res, 200, '[]') : sendError(res, 404, 'Not Found')
      }
      const running = engine.running()
      const gauges = opts.dialect === 'sglang' ? published : { running, waiting: streams.size - running, kvUsage: kvUsageNow() }
      const counters: SimCounters = { ...gauges, promptTokens, generationTokens, requestsFinished }
      const shape = { version: opts.version, iterationStats: opts.iterationStats }
      res
        .writeHead(200, { 'content-type': 'text/plain; version=0.0.4' })
        .end(renderMetrics(opts.dialect, opts.model, counters, timings, shape))
      return
    }
    const version = versionRoutes(opts.dialect, opts.version)
    if (version.paths.includes(path)) return sendJson(res, 200, JSON.stringify(version.body))
    if (path === '/version' || path === '/server_info' || path === '/get_server_info' || path === '/props') {
      return sendError(res, 404, 'Not Found')
    }
    if (path === '/v1/models') {
      const model = { id: opts.model, object: 'model', created: startedS, owned_by: 'servegate-sim', max_model_len: opts.maxModelLen }
      sendJson(res, 200, JSON.stringify({ object: 'list', data: [model] }))
      return
    }
    const body = await readJson(req)
    if (!body.ok) {
      sendError(res, body.status, body.message)
      return
    }
    if (!route.api) {
      tokenize(res, body.value)
      return
    }
    complete(req, res, route.api, body.value)
  }

  function tokenize(res: ServerResponse, body: unknown): void {
    if (opts.noTokenize) return sendError(res, 404, 'Not Found')
    tokenizeRequests++
    const parsed = parseTokenizeRequest(body)
    if (!parsed.ok) return sendError(res, 400, parsed.message)
    if (!checkModel(res, parsed.model)) return
    sendJson(res, 200, JSON.stringify({ count: parsed.tokens.length, max_model_len: opts.maxModelLen, tokens: parsed.tokens }))
  }

  function checkModel(res: ServerResponse, model: string | null): boolean {
    if (model === null || model === opts.model) return true
    sendError(res, 404, `The model \`${model}\` does not exist.`, 'model')
    return false
  }

  function complete(req: IncomingMessage, res: ServerResponse, api: SimApi, body: unknown): void {
    const parsed = parseCompletionRequest(api, body)
    if (!parsed.ok) return sendError(res, 400, parsed.message)
    const request = parsed.request
    if (!checkModel(res, request.model)) return
    if (!request.stream) {
      return sendError(res, 400, 'stream: the simulated engine serves streaming requests only; set "stream": true', 'stream')
    }
    const tooLong = contextOverflow(request, opts.maxModelLen)
    if (tooLong) return sendError(res, 400, tooLong, api === 'chat' ? 'messages' : 'prompt')
    const neverFits = kvOverflow(request.promptTokens, outputLength(opts, request).tokens, opts.kvBudgetTokens)
    if (neverFits) return sendError(res, 400, neverFits, api === 'chat' ? 'messages' : 'prompt')
    if (closing || res.destroyed || req.socket.destroyed) return

    const index = requests++
    const fault = faultPlan(index)
    if (fault) faultsInjected[fault]++
    if (fault === 'http500') return sendError(res, 500, `simulated fault http500 on request ${index}`)
    if (fault === 'http429') {
      return sendError(res, 429, `simulated fault http429 on request ${index}; retry later`, null, { 'retry-after': '2' })
    }

    promptTokens += request.promptTokens
    const openedAt = performance.now()
    let firstTokenAt: number | null = null
    const stream = new SimStream(res, streamPlan(opts, request, index, fault), (emitted, complete) => {
      streams.delete(stream)
      if (complete && fault === null) cleanCompletions++
      generationTokens += emitted
      requestsFinished++
      if (emitted > 0 && firstTokenAt !== null) {
        timings.count++
        timings.ttftSecondsSum += (firstTokenAt - openedAt) / 1000
        timings.prefillSecondsSum += request.promptTokens / opts.prefillTokPerS
        timings.decodeSecondsSum += (performance.now() - firstTokenAt) / 1000
      }
    })
    // The engine steps this job: its first step is the end of its prefill (its first token).
    const job = {
      promptTokens: stream.promptTokens,
      reservedTokens: stream.reservedTokens,
      step: () => {
        firstTokenAt ??= performance.now()
        return stream.step()
      },
    }
    streams.add(stream)
    maxActive = Math.max(maxActive, streams.size)
    res.on('close', () => {
      engine.cancel(job)
      stream.dispose()
    })
    stream.open()
    engine.submit(job)
  }

  await listen(server, opts)
  const { address, family, port } = server.address() as AddressInfo
  const url = family === 'IPv6' ? `http://[${address}]:${port}` : `http://${address}:${port}`

  return {
    url,
    port,
    stats: () => ({
      requests,
      tokenizeRequests,
      active: streams.size,
      maxActive,
      connectionsAccepted,
      maxRunning: engine.maxRunning(),
      queued: engine.queued(),
      maxQueued: engine.maxQueued(),
      faultsInjected: { ...faultsInjected },
      cleanCompletions,
    }),
    close() {
      closing ??= new Promise<void>((resolve) => {
        engine.close()
        for (const stream of streams) stream.dispose()
        server.close(() => resolve())
        server.closeAllConnections()
      })
      return closing
    },
  }
}

/** How many tokens a request will generate (without faults), and whether it stops at its limit. */
function outputLength(opts: ResolvedSimOptions, parsed: SimRequest): { tokens: number; atLimit: boolean } {
  const request = opts.ignoreOutputKnobs ? { ...parsed, ignoreEos: false, minTokens: 0 } : parsed
  const limit = request.maxTokens ?? opts.maxModelLen - request.promptTokens
  const natural = request.ignoreEos ? limit : Math.max(request.minTokens, opts.outputTokens ?? limit)
  return { tokens: Math.min(limit, natural), atLimit: natural >= limit }
}

/** Decides length, reasoning split, fault and words of one accepted request. */
function streamPlan(opts: ResolvedSimOptions, request: SimRequest, index: number, fault: FaultKind | null): StreamPlan {
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
    tokensPerChunk: opts.tokensPerChunk,
    fault: fault === 'drop' || fault === 'malformed' || fault === 'stall' ? fault : null,
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
function kvOverflow(promptTokens: number, outputTokens: number, kvBudgetTokens: number | null): string | null {
  const needed = promptTokens + outputTokens
  if (kvBudgetTokens === null || needed <= kvBudgetTokens) return null
  return (
    `This request needs ${needed} KV tokens (${promptTokens} prompt + ${outputTokens} output) ` +
    `but the KV budget is ${kvBudgetTokens} tokens; it could never be scheduled. Reduce the prompt or max_tokens.`
  )
}

/** vLLM's 400 when prompt plus requested output exceed the context window; null when it fits. */
function contextOverflow(request: SimRequest, maxModelLen: number): string | null {
  const requested = request.promptTokens + (request.maxTokens ?? 1)
  if (requested <= maxModelLen) return null
  return (
    `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${requested} tokens ` +
    `(${request.promptTokens} in the messages, ${request.maxTokens ?? 1} in the completion). ` +
    'Please reduce the length of the messages or completion.'
  )
}

async function listen(server: ReturnType<typeof createServer>, opts: ResolvedSimOptions): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen({ host: opts.host, port: opts.port }, () => {
        server.off('error', reject)
        resolve()
      })
    })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EADDRINUSE') {
      throw new ServegateError(
        'CONFIG_INVALID',
        `port: ${opts.port} is already in use on ${opts.host}; pick another port, or 0 for a free one`,
        { cause: error },
      )
    }
    if (code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT') {
      throw new ServegateError('CONFIG_INVALID', `host: ${opts.host} is not available on this machine; use 127.0.0.1`, {
        cause: error,
      })
    }
    throw new ServegateError('INTERNAL', `sim could not listen on ${opts.host}:${opts.port}: ${String(error)}`, {
      cause: error,
    })
  }
}

type JsonBody = { ok: true; value: unknown } | { ok: false; status: number; message: string }

async function readJson(req: IncomingMessage): Promise<JsonBody> {
  const chunks: Buffer[] = []
  let bytes = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length
    // Keep draining past the limit so the 413 can still be written on this connection.
    if (bytes <= MAX_BODY_BYTES) chunks.push(chunk)
  }
  if (bytes > MAX_BODY_BYTES) {
    return { ok: false, status: 413, message: `body: ${bytes} bytes is over the sim's limit of ${MAX_BODY_BYTES}` }
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }
  } catch (error) {
    return { ok: false, status: 400, message: `body: not valid JSON (${(error as Error).message})` }
  }
}

function sendJson(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers })
  res.end(body)
}

function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  param: string | null = null,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, errorBody(status, message, param), headers)
}
