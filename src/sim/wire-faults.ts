import { createServer, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

/**
 * What a {@link startWireFaultServer} answers every completion request with: a 200 HTML page (a
 * proxy's login or error page), a 200 non-streaming JSON completion (a server that ignored
 * `"stream": true`), a malformed status line, or a 200 event stream whose first `data:` line
 * never ends (`longLineBytes` of it, 50 MB by default).
 */
export type WireFault = 'html-page' | 'json-reply' | 'malformed-status-line' | 'endless-line'

/** A loopback server that breaks HTTP or SSE in one way, and counts what it was sent. */
export interface WireFaultServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** Requests whose head the server read (each one the engine would have worked on). */
  requests(): number
  /** Of those, completion requests (`POST …/completions`), without the client's probes. */
  completions(): number
  close(): Promise<void>
}

const HTML = '<!DOCTYPE html><html><head><title>Sign in</title></head><body>Log in to continue</body></html>'
const JSON_REPLY = JSON.stringify({
  id: 'cmpl-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 2, completion_tokens: 1 },
})

function reply(socket: Socket, type: string, body: string): void {
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
}

/** Writes `bytes` of `a` after `data: `, in 64 KiB writes that wait for the socket to drain; no line end. */
function endlessLine(socket: Socket, bytes: number): void {
  socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: ')
  const block = Buffer.alloc(64 * 1024, 0x61)
  let left = bytes
  const pump = (): void => {
    while (left > 0 && !socket.destroyed) {
      left -= block.length
      if (!socket.write(block)) {
        socket.once('drain', pump)
        return
      }
    }
    socket.end()
  }
  pump()
}

/**
 * Starts a loopback server that answers each request with `fault`, for tests of how the client
 * classifies what it gets. Keep-alive is honoured for the replies that have a length.
 * @example
 * const server = await startWireFaultServer('html-page')
 * // streamCompletion(...) → RESPONSE_NOT_STREAM; server.requests() === 1
 */
export async function startWireFaultServer(fault: WireFault, options: { longLineBytes?: number } = {}): Promise<WireFaultServer> {
  let requests = 0
  let completions = 0
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
    let buffered = Buffer.alloc(0)
    socket.on('data', (bytes: Buffer) => {
      buffered = Buffer.concat([buffered, bytes])
      for (;;) {
        const headEnd = buffered.indexOf('\r\n\r\n')
        if (headEnd < 0) return
        const head = buffered.toString('latin1', 0, headEnd)
        const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0)
        if (buffered.length < headEnd + 4 + length) return
        buffered = buffered.subarray(headEnd + 4 + length)
        requests++
        if (/^POST \S*\/completions /.test(head)) completions++
        if (fault === 'html-page') reply(socket, 'text/html; charset=utf-8', HTML)
        else if (fault === 'json-reply') reply(socket, 'application/json', JSON_REPLY)
        else if (fault === 'malformed-status-line')
          socket.end('HTTP/1.1 2OO OKAY\r\ncontent-type: text/event-stream\r\n\r\ndata: [DONE]\n\n')
        else endlessLine(socket, options.longLineBytes ?? 50 * 1024 * 1024)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    completions: () => completions,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}
