import { connect as netConnect, isIP, type Socket } from 'node:net'
import type * as NodeTls from 'node:tls'
import type { SecureContext } from 'node:tls'
import { type Http1Headers, Http1ResponseParser } from './http1.ts'

/** A whole reply, read to its end. */
export interface HttpReply {
  statusCode: number
  /** Names lower-cased; a repeated header keeps every value. */
  headers: Http1Headers
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

/**
 * Node's `tls`, loaded when an `https://` origin first needs it: a loopback cell never does, and
 * loading it makes the process some 4 MB larger (docs/client-benchmark.md, "Where the memory goes").
 */
export function nodeTls(): typeof NodeTls {
  return process.getBuiltinModule('node:tls')
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
    const tls = nodeTls()
    systemContext ??= tls.createSecureContext({
      ca: [...new Set([...tls.getCACertificates('default'), ...tls.getCACertificates('system')])],
    })
    return systemContext
  }
  let context = contexts.get(key)
  if (context === undefined) {
    context = nodeTls().createSecureContext({ ca })
    contexts.set(key, context)
  }
  return context
}

/** A request that failed on its own terms (too slow, too large, cut), with a socket-style `code`. */
class HttpRequestError extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

/** Bytes of a reply body read before the request fails: the probes, scrapes and tokenizer replies it serves are small. */
const MAX_BODY_BYTES = 64 * 1024 * 1024

/** The request's bytes: its head (`connection: close`, one request a connection) and body. */
function requestBytes(target: URL, options: HttpRequestOptions): Buffer {
  let head = `${options.method ?? 'GET'} ${target.pathname}${target.search} HTTP/1.1\r\nhost: ${target.host}\r\n`
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    // A CR or LF would end the header early and let the rest be read as another one.
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) {
      throw new HttpRequestError('ERR_INVALID_CHAR', `header ${JSON.stringify(name)}: a value with a line break cannot be sent`)
    }
    head += `${name}: ${value}\r\n`
  }
  const body = options.body === undefined ? null : Buffer.from(options.body, 'utf8')
  head += body === null ? 'connection: close\r\n\r\n' : `content-length: ${body.length}\r\nconnection: close\r\n\r\n`
  return body === null ? Buffer.from(head, 'latin1') : Buffer.concat([Buffer.from(head, 'latin1'), body])
}

/** A socket to `target`: TLS verified against `tlsTrust` for `https:`, plain TCP otherwise. */
function connectTo(target: URL): Socket {
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1')
  if (target.protocol !== 'https:') return netConnect({ host, port: Number(target.port || 80) })
  return nodeTls().connect({
    host,
    port: Number(target.port || 443),
    ...(isIP(host) === 0 ? { servername: host } : {}),
    ALPNProtocols: ['http/1.1'],
    secureContext: tlsTrust(target.href),
  })
}

/**
 * One small request off the measured path (a probe, a `/metrics` scrape, a `/tokenize` call),
 * its whole reply read, on a connection of its own, parsed by the streaming client's HTTP/1.1
 * parser (`http1.ts`). Neither Node's `http` nor undici is loaded: each would make a cell's
 * process 10–15 MB larger (docs/client-benchmark.md, "Where the memory goes"). A redirect is never
 * followed: a 3xx comes back to the caller as it is. Rejects with the socket's error (its `code`:
 * ECONNREFUSED, ECONNRESET…), the signal's reason, or an ETIMEDOUT error.
 * @example const reply = await httpRequest('http://127.0.0.1:8000/v1/models', { signal: AbortSignal.timeout(5000) })
 */
export function httpRequest(url: string, options: HttpRequestOptions = {}): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const { signal, timeoutMs } = options
    if (signal?.aborted === true) {
      reject(signal.reason as Error)
      return
    }
    const target = new URL(url)
    let bytes: Buffer
    try {
      bytes = requestBytes(target, options)
    } catch (error) {
      reject(error as Error)
      return
    }
    const socket = connectTo(target)
    let timer: NodeJS.Timeout | null = null
    let settled = false
    const settle = (): boolean => {
      if (settled) return false
      settled = true
      if (timer !== null) clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      socket.destroy()
      return true
    }
    const fail = (err: Error): void => {
      if (settle()) reject(err)
    }
    function onAbort(): void {
      fail(signal?.reason as Error)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => fail(new HttpRequestError('ETIMEDOUT', `no reply from ${url} within ${timeoutMs} ms`)), timeoutMs)
    }
    const pieces: Buffer[] = []
    let length = 0
    let reply: Pick<HttpReply, 'statusCode' | 'headers'> | null = null
    const parser = new Http1ResponseParser({
      onHead: (statusCode, headers) => (reply = { statusCode, headers }),
      onBody: (piece) => {
        length += piece.length
        if (length > MAX_BODY_BYTES) fail(new HttpRequestError('EMSGSIZE', `${url}: reply body over ${MAX_BODY_BYTES} bytes`))
        else pieces.push(Buffer.from(piece))
      },
      onEnd: () => {
        if (reply !== null && settle()) resolve({ ...reply, text: Buffer.concat(pieces).toString('utf8') })
      },
    })
    socket.setNoDelay(true)
    socket.on('data', (read: Buffer) => {
      try {
        parser.push(read)
      } catch (error) {
        fail(error as Error)
      }
    })
    socket.on('error', fail)
    socket.on('close', () => {
      if (!parser.close()) fail(new HttpRequestError('ECONNRESET', `${url}: the connection closed before the reply ended (socket hang up)`))
    })
    // Not end(): a half-closed connection is closed at once by some servers (TLS ones read close_notify as the end).
    socket.write(bytes)
  })
}
