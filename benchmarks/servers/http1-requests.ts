import type { Socket } from 'node:net'

/** The largest request head or body a bench server reads, bytes; a bench request is far smaller. */
const MAX_REQUEST_BYTES = 1 << 20
const HEAD_END = Buffer.from('\r\n\r\n')

/**
 * One request as a bench server sees it. `body` is a view of the connection's buffer: the exact
 * bytes the client sent after the head (`content-length` of them), valid only during the call.
 */
export type RequestHandler = (socket: Socket, method: string, path: string, body: Buffer) => void

/** Writes a whole response with a `content-length` body. */
export function respond(socket: Socket, status: string, type: string, body: string): void {
  socket.write(`HTTP/1.1 ${status}\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
}

/** One HTTP/1.1 chunk of a chunked response. */
export function httpChunk(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`
}

/**
 * Reads HTTP/1.1 requests off one connection, one after another (keep-alive; no pipelining is
 * expected), each with a `content-length` body or none, and hands each to `answer`. A chunked
 * request or one over 1 MiB gets a 400 and the connection is closed.
 */
export function readRequests(socket: Socket, answer: RequestHandler): void {
  let pending: Buffer = Buffer.alloc(0)
  socket.on('data', (data: Buffer) => {
    pending = pending.length === 0 ? data : Buffer.concat([pending, data])
    for (;;) {
      const headEnd = pending.indexOf(HEAD_END)
      if (headEnd < 0) break
      const head = pending.subarray(0, headEnd).toString('latin1')
      const lineEnd = head.indexOf('\r\n')
      const [method = '', path = ''] = (lineEnd < 0 ? head : head.slice(0, lineEnd)).split(' ')
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(head)
      const bodyBytes = length === null ? 0 : Number(length[1])
      if (/\r\ntransfer-encoding:/i.test(head) || bodyBytes > MAX_REQUEST_BYTES) {
        respond(socket, '400 Bad Request', 'text/plain', 'send a content-length body of at most 1 MiB')
        socket.end()
        return
      }
      const end = headEnd + HEAD_END.length + bodyBytes
      if (pending.length < end) break
      answer(socket, method, path, pending.subarray(headEnd + HEAD_END.length, end))
      pending = pending.subarray(end)
    }
    if (pending.length > MAX_REQUEST_BYTES) socket.destroy()
  })
  socket.on('error', () => socket.destroy())
}
