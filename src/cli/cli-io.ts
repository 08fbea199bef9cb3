import { StringDecoder } from 'node:string_decoder'
import { scrubCredentials } from '../errors.ts'

/** The streams a command writes to; tests pass buffers. `isTTY` decides whether progress is drawn. */
export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean }
  stderr: NodeJS.WritableStream & { isTTY?: boolean }
}

/**
 * The same streams, with every write scrubbed of the registered secrets (src/secrets.ts) and of
 * credential-looking labels (`authorization: …`, `Bearer …`): the one place the CLI's stdout and
 * stderr pass. Each write is scrubbed on its own (the commands write whole lines); bytes are
 * decoded as UTF-8 across writes, so a character split between two writes survives.
 */
export function scrubbingIo(io: CliIo): CliIo {
  return { stdout: scrubbing(io.stdout), stderr: scrubbing(io.stderr) }
}

function scrubbing<S extends NodeJS.WritableStream>(stream: S): S {
  const decoder = new StringDecoder('utf8')
  const write = (chunk: unknown, ...rest: unknown[]): boolean => {
    const text = typeof chunk === 'string' ? chunk : chunk instanceof Uint8Array ? decoder.write(Buffer.from(chunk)) : null
    return (stream.write as (...args: unknown[]) => boolean).call(stream, text === null ? chunk : scrubCredentials(text), ...rest)
  }
  return new Proxy(stream, {
    get(target, property) {
      if (property === 'write') return write
      const value: unknown = Reflect.get(target, property, target)
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
    },
  })
}
