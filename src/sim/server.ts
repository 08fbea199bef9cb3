import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ServegateError } from '../errors.ts'
import { atLaunchSpeed, launchSpeed } from './launch-speed.ts'
import { SimHandler } from './sim-handler.ts'
import { resolveSimOptions, type ResolvedSimOptions, type SimOptions } from './sim-options.ts'
import type { SimStats } from './served-tally.ts'

/** A running simulated engine. */
export interface SimServer {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:8000`; append `/v1/...`. */
  url: string
  port: number
  /**
   * This launch's speed multiplier (`launchNoise`): its prefill and decode speeds are the options'
   * times this. 1 without launch noise.
   */
  launchSpeed: number
  stats(): SimStats
  /** Stops listening, ends every open connection and cancels every timer. Idempotent. */
  close(): Promise<void>
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
  const resolved = resolveSimOptions(options)
  const speed = launchSpeed(resolved)
  const opts = atLaunchSpeed(resolved, speed)
  const handler = new SimHandler(opts)
  const server = createServer((req, res) => handler.request(req, res))
  server.on('connection', () => handler.connected())
  await listen(server, opts)
  const { address, family, port } = server.address() as AddressInfo
  const url = family === 'IPv6' ? `http://[${address}]:${port}` : `http://${address}:${port}`
  let closing: Promise<void> | null = null
  return {
    url,
    port,
    launchSpeed: speed,
    stats: () => handler.stats(),
    close() {
      closing ??= new Promise<void>((resolve) => {
        handler.close()
        server.close(() => resolve())
        server.closeAllConnections()
      })
      return closing
    },
  }
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
