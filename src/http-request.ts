import { type IncomingHttpHeaders, request as httpOnly } from 'node:http'
import { request as httpsOnly, type RequestOptions as HttpsRequestOptions } from 'node:https'
import { createSecureContext, getCACertificates, type SecureContext } from 'node:tls'

/** A whole reply, read to its end. */
export interface HttpReply {
  statusCode: number
  headers: IncomingHttpHeaders
  /** The body as UTF-8. */
  text: string
}

/** How `httpRequest` sends. */
export interface HttpRequestOptions {
  /** @default 'GET' */
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string
  signal?: AbortSignal
  /** From the request's start to the body's end, ms; past it the request fails with code ETIMEDOUT. @default none */
  timeoutMs?: number
}

/** The CA certificates (PEM) a remote HTTPS origin is verified against, by origin: `--ca-file` / `caFile`. */
const trustedCas = new Map<string, string>()

/**
 * Verifies `origin`'s TLS certificate against `caPem` (instead of the system's CAs) for every
 * request to it from this thread: the probes here and the measuring client's connections.
 * @example trustCa('https://10.0.0.2:8443', readFileSync('ca.pem', 'utf8'))
 */
export function trustCa(origin: string, caPem: string): void {
  const key = new URL(origin).origin
  trustedCas.set(key, caPem)
  contexts.delete(key)
}

/** The CA (PEM) `trustCa` named for `origin`, or undefined for the system's CAs. */
export function trustedCa(origin: string): string | undefined {
  return trustedCas.get(new URL(origin).origin)
}

const contexts = new Map<string, SecureContext>()
let systemContext: SecureContext | null = null

/**
 * What an `https://` origin's certificate is verified against: the CA `trustCa` named for it, or
 * else Node's CA store with the system's added (`tls.getCACertificates('system')`: on Linux
 * OpenSSL's store, `SSL_CERT_FILE` / `SSL_CERT_DIR` included), so a CA installed on the machine
 * is trusted as other clients there trust it. Built once and kept.
 */
export function tlsTrust(origin: string): SecureContext {
  const key = new URL(origin).origin
  const ca = trustedCas.get(key)
  if (ca === undefined) {
    systemContext ??= createSecureContext({ ca: [...new Set([...getCACertificates('default'), ...getCACertificates('system')])] })
    return systemContext
  }
  let context = contexts.get(key)
  if (context === undefined) {
    context = createSecureContext({ ca })
    contexts.set(key, context)
  }
  return context
}

/**
 * An HTTPS request's options: verified against `tlsTrust(url)`, on a connection of its own (the
 * shared agent pools by host, not by trust).
 */
function httpsOptions(url: string, options: HttpRequestOptions): HttpsRequestOptions {
  // tls.connect takes secureContext; Node's typings of https.request leave it out.
  const withTrust: HttpsRequestOptions & { secureContext: SecureContext } = {
    method: options.method ?? 'GET',
    headers: options.headers,
    agent: false,
    secureContext: tlsTrust(url),
  }
  return withTrust
}

/** A request that failed on its own terms (too slow, too large), with a socket-style `code`. */
class HttpRequestError extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

/** Bytes of a reply body read before the request fails: the probes, scrapes and tokenizer replies it serves are small. */
const MAX_BODY_BYTES = 64 * 1024 * 1024

/**
 * One small request off the measured path (a probe, a `/metrics` scrape, a `/tokenize` call),
 * its whole reply read, with Node's own `http`: the measuring client's path has its own sockets
 * (`client/connections.ts`), and leaving undici out keeps a cell's process some 10 MB smaller.
 * Rejects with the socket's error (its `code`: ECONNREFUSED, ECONNRESET…), the signal's reason,
 * or an ETIMEDOUT error.
 * @example const reply = await httpRequest('http://127.0.0.1:8000/v1/models', { signal: AbortSignal.timeout(5000) })
 */
export function httpRequest(url: string, options: HttpRequestOptions = {}): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const { signal, timeoutMs } = options
    if (signal?.aborted === true) {
      reject(signal.reason as Error)
      return
    }
    const tls = url.startsWith('https:')
    // Node's http never follows a redirect: a 3xx comes back to the caller as it is.
    const req = tls
      ? httpsOnly(url, httpsOptions(url, options))
      : httpOnly(url, { method: options.method ?? 'GET', headers: options.headers })
    let timer: NodeJS.Timeout | null = null
    const done = (): void => {
      if (timer !== null) clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
    const fail = (err: Error): void => {
      done()
      req.destroy()
      reject(err)
    }
    function onAbort(): void {
      fail(signal?.reason as Error)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => fail(new HttpRequestError('ETIMEDOUT', `no reply from ${url} within ${timeoutMs} ms`)), timeoutMs)
    }
    req.on('error', fail)
    req.on('response', (res) => {
      const pieces: Buffer[] = []
      let bytes = 0
      res.on('data', (piece: Buffer) => {
        bytes += piece.length
        if (bytes > MAX_BODY_BYTES) fail(new HttpRequestError('EMSGSIZE', `${url}: reply body over ${MAX_BODY_BYTES} bytes`))
        else pieces.push(piece)
      })
      res.on('error', fail)
      res.on('end', () => {
        done()
        resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(pieces).toString('utf8') })
      })
    })
    req.end(options.body)
  })
}
