import { Server as HttpServer } from 'node:http'
import { batchBackgroundThreads } from '../../src/runner/background-threads.ts'
import { MODEL } from '../chunks.ts'
import type { AddressInfo, Server, Socket } from 'node:net'

/**
 * Runs a bench server as a child process: binds 127.0.0.1 (never another interface), prints
 * `listening <port>` on stdout, and exits when told to (SIGTERM, SIGINT) or when its parent
 * goes away (stdin closes), so no server outlives the bench.
 * @param port 0 picks a free port
 * @param onStop cancels the server's own timers before the connections are closed
 */
export function serveUntilStopped(server: Server, port: number, onStop: () => void = () => {}): void {
  if (server instanceof HttpServer) server.keepAliveTimeout = 60_000
  const sockets = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    socket.setNoDelay(true)
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  stopWith(() => {
    onStop()
    server.close()
    for (const socket of sockets) socket.destroy()
  })
  server.listen(port, '127.0.0.1', () => {
    // As a measuring client's: V8's workers must not preempt the thread between a chunk's stamp
    // and its write (the paced server's own compilations had put 1.2 ms there, at the same chunk
    // of every run). Ready once they are batched.
    void batchBackgroundThreads().finally(() => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`))
  })
}

/**
 * Calls `stop` once when the server is told to stop (SIGTERM, SIGINT) or its parent goes away
 * (stdin closes), then lets the process exit; sockets a client keeps half-open do not hold it.
 */
export function stopWith(stop: () => void): void {
  let stopping = false
  const once = (): void => {
    if (stopping) return
    stopping = true
    stop()
    process.stdin.destroy()
    process.exitCode = 0
    setTimeout(() => process.exit(0), 200).unref()
  }
  process.on('SIGTERM', once)
  process.on('SIGINT', once)
  process.stdin.on('end', once)
  process.stdin.on('close', once)
  process.stdin.on('error', once)
  process.stdin.resume()
}

/** The `GET /v1/models` body, as vLLM answers it: the served model and its context. */
export const MODELS_BODY = JSON.stringify({
  object: 'list',
  data: [{ id: MODEL, object: 'model', owned_by: 'bench', max_model_len: 131_072 }],
})

/** The `max_tokens` of a JSON request body, or `fallback` when absent or unreadable. */
export function maxTokensOf(body: Buffer, fallback: number): number {
  try {
    const n = (JSON.parse(body.toString('utf8')) as { max_tokens?: unknown }).max_tokens
    return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : fallback
  } catch {
    return fallback
  }
}
