import { StringDecoder } from 'node:string_decoder'
import { sanitizeMessage } from '../errors.ts'
import { SecretStreamScrubber } from '../secrets.ts'

/** Lines of an engine's output kept in memory for its failure messages. */
export const TAIL_LINES = 40

/** Where the log goes: a file's write stream, in use. */
export interface LogSink {
  write(text: string): unknown
  end(text: string): unknown
}

/**
 * An engine's output on its way to the log: stdout and stderr bytes are decoded (a character
 * split between two chunks of one stream stays whole), written to the sink scrubbed of the
 * registered secrets, and the last lines kept in memory for the engine's failure messages.
 * @example const log = new LogTail(createWriteStream(path)); child.stdout.on('data', (b) => log.stdout(b)); log.tail()
 */
export class LogTail {
  readonly #sink: LogSink
  readonly #scrubber = new SecretStreamScrubber()
  // One decoder per stream.
  readonly #stdout = new StringDecoder('utf8')
  readonly #stderr = new StringDecoder('utf8')
  readonly #lines: string[] = []
  #partial = ''

  constructor(sink: LogSink) {
    this.#sink = sink
  }

  /** Bytes the engine wrote to stdout. */
  stdout(bytes: Buffer): void {
    this.text(this.#stdout.write(bytes))
  }

  /** Bytes the engine wrote to stderr. */
  stderr(bytes: Buffer): void {
    this.text(this.#stderr.write(bytes))
  }

  /** Text for the log, the engine's or servegate's own (why the engine could not start). */
  text(text: string): void {
    this.#sink.write(this.#scrubber.write(text))
    const lines = (this.#partial + text).split(/\r?\n/)
    this.#partial = lines.pop() ?? ''
    for (const line of lines) {
      this.#lines.push(line)
      if (this.#lines.length > TAIL_LINES) this.#lines.shift()
    }
  }

  /** The engine exited: its last, unterminated line joins the tail and the log is closed. */
  end(): void {
    if (this.#partial !== '') this.#lines.push(this.#partial)
    this.#partial = ''
    this.#sink.end(this.#scrubber.write(this.#stdout.end() + this.#stderr.end()) + this.#scrubber.end())
  }

  /** The last lines of the output, sanitized, at most 4000 characters. */
  tail(): string {
    const lines = [...this.#lines, this.#partial].filter((l) => l !== '')
    return sanitizeMessage(lines.slice(-TAIL_LINES).join('\n'), 4000)
  }
}
