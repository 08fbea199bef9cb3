/**
 * A long cell's request records on disk instead of in memory: each finished request is one JSON
 * line appended to a spill file, as the record file holds it (gaps packed, scrubbed of the
 * registered secrets: record-writer.ts `requestLine`), and the cell keeps only where each line
 * lies, 12 bytes a request, allocated for the plan up front. The record file is then written from
 * the spill, its lines copied in plan order, byte for byte what writing the whole record from
 * memory gives. A cell killed outright (SIGKILL, out of power) leaves the
 * spill: one valid line per request that finished, less at most the last second's; where a
 * request's record was made again (its usage judged by the engine's tokenizer after the measured
 * requests), its later line supersedes the earlier one.
 */
import { type FileHandle, mkdir, open, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import { ServegateError } from '../errors.ts'
import { unpackGaps } from '../schema/itl-packed.ts'
import type { RequestRecord, RunRecord } from '../schema/run.ts'
import { requestLine, writeRunRecordLines } from './record-writer.ts'

/** Lines are written once this many bytes wait, or after FLUSH_EVERY_MS, whichever comes first. */
const FLUSH_BYTES = 64 * 1024
const FLUSH_EVERY_MS = 1000
/** Reading back: one read covers this many bytes of nearby lines. */
const READ_WINDOW = 1024 * 1024

export class RequestSpill {
  /** Byte offset of request i's line, NaN until it ended. */
  private offsets = new Float64Array(1024).fill(Number.NaN)
  private lengths = new Uint32Array(1024)
  private pending: string[] = []
  private pendingBytes = 0
  private bytes = 0
  private writing: Promise<unknown> = Promise.resolve()
  private writeError: unknown = null
  private timer: NodeJS.Timeout | null = null
  private closed = false
  /** Requests spilled so far. */
  count = 0

  readonly path: string
  private readonly file: FileHandle

  private constructor(path: string, file: FileHandle) {
    this.path = path
    this.file = file
  }

  /**
   * Creates (or truncates) a spill file.
   * @throws ServegateError FILE_INVALID when the file cannot be created
   */
  static async create(path: string): Promise<RequestSpill> {
    try {
      await mkdir(dirname(path), { recursive: true })
      return new RequestSpill(path, await open(path, 'w+'))
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'unwritable'
      throw new ServegateError('FILE_INVALID', `cannot create the request spill ${path} (${code}); pass an --out in a writable directory`, {
        cause: err,
      })
    }
  }

  /** Appends one finished request (its `index` places it in plan order). */
  add(record: RequestRecord): void {
    if (this.closed) throw new ServegateError('INTERNAL', 'RequestSpill.add after close')
    const i = record.index
    if (i >= this.offsets.length) this.grow(i + 1)
    if (!Number.isNaN(this.offsets[i] as number)) throw new ServegateError('INTERNAL', `RequestSpill.add: request ${i} was already spilled`)
    this.count++
    this.append(record)
  }

  /** Appends a request's record made again; its line supersedes the one spilled before. */
  replace(record: RequestRecord): void {
    if (this.closed) throw new ServegateError('INTERNAL', 'RequestSpill.replace after close')
    const i = record.index
    if (i >= this.offsets.length || Number.isNaN(this.offsets[i] as number)) {
      throw new ServegateError('INTERNAL', `RequestSpill.replace: request ${i} was never spilled`)
    }
    this.append(record)
  }

  private append(record: RequestRecord): void {
    const i = record.index
    const line = `${requestLine(record)}\n`
    const size = Buffer.byteLength(line)
    this.offsets[i] = this.bytes
    this.lengths[i] = size - 1
    this.bytes += size
    this.pending.push(line)
    this.pendingBytes += size
    if (this.pendingBytes >= FLUSH_BYTES) this.writeOut()
    else this.timer ??= setTimeout(() => this.writeOut(), FLUSH_EVERY_MS).unref()
  }

  private grow(atLeast: number): void {
    let size = this.offsets.length
    while (size < atLeast) size *= 2
    const offsets = new Float64Array(size).fill(Number.NaN)
    offsets.set(this.offsets)
    const lengths = new Uint32Array(size)
    lengths.set(this.lengths)
    this.offsets = offsets
    this.lengths = lengths
  }

  /** Hands what waits to the file, in order. */
  private writeOut(): void {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    if (this.pending.length === 0) return
    const text = this.pending.join('')
    this.pending = []
    this.pendingBytes = 0
    this.writing = this.writing.then(() => this.file.write(text)).catch((err: unknown) => (this.writeError ??= err))
  }

  /** Waits until every line added so far is in the file. */
  async flush(): Promise<void> {
    this.writeOut()
    await this.writing
    if (this.writeError !== null) {
      const code = (this.writeError as { code?: string }).code ?? 'write failed'
      throw new ServegateError(
        'FILE_INVALID',
        `cannot write the request spill ${this.path} (${code}); free disk space or pass another --out`,
        {
          cause: this.writeError,
        },
      )
    }
  }

  /**
   * Every spilled request in plan order, read back from the file (flushed first), its gaps
   * unpacked into `itlMs`, or left packed in `itlPacked` (`unpack` false) for a reader that
   * decodes them itself (`CellTally` pools a cell's gaps into one array).
   */
  async *inOrder(unpack = true): AsyncGenerator<RequestRecord> {
    for await (const line of this.lines()) {
      const record = JSON.parse(line) as RequestRecord
      if (unpack && record.itlPacked !== null) {
        const gaps = unpackGaps(record.itlPacked)
        if (!Array.isArray(gaps)) {
          throw new ServegateError('FILE_INVALID', `${this.path}: request ${record.index}: itlPacked.${gaps.message}; the spill is corrupt`)
        }
        record.itlMs = gaps
        record.itlPacked = null
      }
      yield record
    }
  }

  /** Every spilled request's line in plan order, as the record file holds it (no newline), read back from the file (flushed first). */
  async *lines(): AsyncGenerator<string> {
    await this.flush()
    let window = Buffer.alloc(0)
    let windowStart = 0
    for (let i = 0; i < this.offsets.length; i++) {
      const offset = this.offsets[i] as number
      if (Number.isNaN(offset)) continue
      const length = this.lengths[i] as number
      if (offset < windowStart || offset + length > windowStart + window.length) {
        window = Buffer.alloc(Math.max(READ_WINDOW, length))
        const { bytesRead } = await this.file.read(window, 0, window.length, offset)
        window = window.subarray(0, bytesRead)
        windowStart = offset
      }
      const at = offset - windowStart
      yield window.toString('utf8', at, at + length)
    }
  }

  /** Flushes and closes the file, which stays on disk. */
  async close(): Promise<void> {
    if (this.closed) return
    await this.flush()
    this.closed = true
    await this.file.close()
  }

  /** Closes and deletes the spill (once the record holding its requests is written). */
  async remove(): Promise<void> {
    await this.close().catch(() => {})
    await rm(this.path, { force: true })
  }
}

/**
 * Writes a run record whose requests are in a spill, atomically and streaming: the spill's lines
 * are copied in plan order, so the bytes are exactly `writeRunRecord(path, record with its
 * requests)`'s, while memory holds about one piece of the file at a time.
 */
export async function writeSpilledRecord(path: string, record: RunRecord, spill: RequestSpill): Promise<void> {
  await writeRunRecordLines(path, record, spill.lines())
}
