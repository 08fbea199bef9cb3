/**
 * The progress reporter: runs in vitest's main process (it imports no worker code) and shows
 * what each cell of a `vitest bench` run is doing, from the phases its worker sends over a
 * local socket: live lines redrawn in place on a terminal, plain throttled lines in CI.
 */
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Writable } from 'node:stream'
import type { Reporter, TestSpecification, Vitest } from 'vitest/node'
import { FINAL_PHASES, PROGRESS_CONTEXT_KEY, type ProgressContext, ProgressEvent } from '../schema/progress.ts'
import { eraseRows, isLiveTerminal, LineThrottle, progressLine, redraw } from './progress-text.ts'
import { reportersOf } from './vitest-reporters.ts'

declare module 'vitest' {
  interface ProvidedContext {
    servegateProgress: ProgressContext
  }
}

/** Where lines go: a stream that may be a terminal. */
export interface ProgressOutput {
  write(chunk: string): boolean
  isTTY?: boolean
  columns?: number
}

export interface ProgressReporterOptions {
  /** Redraw live lines in place, or print plain lines. @default on a terminal outside CI (`CI` unset) */
  live?: boolean
  /** Plain lines: the least time between two lines of one cell in one phase, ms. @default 5000 */
  intervalMs?: number
  /** Where lines go. @default vitest's output stream (stdout), or its error stream when none of vitest's reporters writes for a person */
  output?: ProgressOutput
  /** The clock, ms since the epoch (the workers stamp their events with theirs). @default Date.now */
  clock?: () => number
}

/** How often figures are refreshed (live) or plain lines checked for being due, ms. */
const TICK_MS = 1000
/** Other output first erases the live lines; they are drawn again this long after it stops, ms. */
const REDRAW_AFTER_MS = 50

/**
 * Lines kept below everything else written to the terminal. Other writers' output (vitest's
 * results, console logs) first erases them and they are drawn again after it, so they never
 * end up in the scrollback; vitest's own live summary buffers writes and draws itself below,
 * which leaves the order intact.
 */
class LiveLines {
  private readonly out: ProgressOutput
  private lines: readonly string[] = []
  private rows = 0
  private atLineStart = true
  private drawing = false
  private pending: ReturnType<typeof setTimeout> | null = null
  private readonly restores: Array<() => void> = []

  constructor(out: ProgressOutput) {
    this.out = out
  }

  /** Watches the other writers to the terminal. */
  watch(streams: ReadonlyArray<Writable | ProgressOutput>): void {
    for (const stream of new Set(streams)) {
      const original = stream.write
      const watched = (chunk: unknown, ...rest: unknown[]): boolean => {
        if (!this.drawing) this.beforeOther(chunk)
        return (original as (...args: unknown[]) => boolean).call(stream, chunk, ...rest)
      }
      stream.write = watched as typeof stream.write
      this.restores.push(() => {
        if (stream.write === watched) stream.write = original as typeof stream.write
      })
    }
  }

  show(lines: readonly string[]): void {
    this.lines = lines
    this.draw()
  }

  /** Erases the lines and stops watching. */
  stop(): void {
    if (this.pending !== null) clearTimeout(this.pending)
    this.pending = null
    this.lines = []
    this.draw()
    for (const restore of this.restores.splice(0)) restore()
  }

  private draw(): void {
    if (this.rows === 0 && this.lines.length === 0) return
    const lead = this.atLineStart || this.lines.length === 0 ? '' : '\n'
    // A terminal of unknown size (a pseudo-terminal may say 0 columns) is taken to be 80 wide.
    const { text, rows } = redraw(this.rows, this.lines, this.out.columns || 80)
    this.write(lead + text)
    this.rows = rows
    if (this.lines.length > 0) this.atLineStart = true
  }

  private beforeOther(chunk: unknown): void {
    const text = typeof chunk === 'string' ? chunk : chunk instanceof Uint8Array ? Buffer.from(chunk).toString('utf8') : ''
    if (text === '') return
    if (this.rows > 0) {
      this.write(eraseRows(this.rows))
      this.rows = 0
    }
    this.atLineStart = text.endsWith('\n')
    if (this.lines.length > 0 && this.pending === null) {
      this.pending = setTimeout(() => {
        this.pending = null
        this.draw()
      }, REDRAW_AFTER_MS)
      this.pending.unref()
    }
  }

  private write(text: string): void {
    if (text === '') return
    this.drawing = true
    try {
      this.out.write(text)
    } finally {
      this.drawing = false
    }
  }
}

interface Entry {
  event: ProgressEvent
  source: unknown
  /** When its phase began: the time of its first event in that phase. */
  phaseSince: number
}

function keyOf(e: ProgressEvent): string {
  return JSON.stringify([e.cell ?? e.engine, e.cell === null ? null : e.arm])
}

/** A local socket path no other run uses (a named pipe on Windows). */
function socketPath(): string {
  const name = `servegate-progress-${process.pid}-${randomBytes(4).toString('hex')}`
  return process.platform === 'win32' ? `\\\\?\\pipe\\${name}` : join(tmpdir(), `${name}.sock`)
}

/**
 * Shows each cell's phase while `vitest bench` runs: launching its engine, waiting for it to
 * become ready (for how long, of what deadline, and its log file), calibrating, warm-up,
 * requests n/N (per arm of a pair, per stage of a sequential one), tearing down. On a terminal
 * the lines are redrawn in place; otherwise (CI, a pipe) a cell prints a line on each change
 * of phase and at most one every `intervalMs` while it stays in one. Other runs (plain
 * `vitest run`, `--merge-reports`) show nothing.
 *
 * It opens a local socket and provides its path to the workers (`inject('servegateProgress')`);
 * the spec layer's cells write their phases there. Add it after vitest's own reporters.
 * @example
 * // vitest.config.ts, for a config that lists its reporters itself
 * export default defineConfig({ test: { reporters: ['default', new ServegateProgressReporter()] } })
 */
export class ServegateProgressReporter implements Reporter {
  private readonly options: ProgressReporterOptions
  private readonly clock: () => number
  private readonly throttle: LineThrottle
  private readonly entries = new Map<string, Entry>()
  private out: ProgressOutput | null = null
  private live: LiveLines | null = null
  private server: Server | null = null
  private path: string | null = null
  private running = false
  private ticker: ReturnType<typeof setInterval> | null = null

  constructor(options: ProgressReporterOptions = {}) {
    this.options = options
    this.clock = options.clock ?? Date.now
    this.throttle = new LineThrottle(options.intervalMs)
    this.out = options.output ?? null
  }

  onInit(vitest: Vitest): void {
    if (vitest.config.mergeReports !== undefined && vitest.config.mergeReports !== '') return
    // With no reporter of vitest's writing for a person (e.g. --reporter=json to stdout), stdout is theirs.
    this.out ??= (reportersOf(vitest).terminal ? vitest.logger.outputStream : vitest.logger.errorStream) as ProgressOutput
    const path = socketPath()
    const server = createServer((socket) => this.accept(socket))
    // No socket, no progress: the run itself is unaffected.
    server.on('error', () => {})
    server.listen(path)
    server.unref()
    this.server = server
    this.path = path
    vitest.provide(PROGRESS_CONTEXT_KEY, { socketPath: path })
    vitest.onClose(() => this.close())
  }

  onTestRunStart(specifications: ReadonlyArray<TestSpecification>): void {
    this.start(specifications.some((s) => s.project.config.benchmark?.enabled === true))
  }

  onTestRunEnd(): void {
    this.finish()
  }

  /**
   * Starts showing progress (`bench`: the run has benchmark projects) or ignores this run's
   * events; `terminal` lists the other writers to watch when drawing live.
   */
  start(bench: boolean, terminal: ReadonlyArray<Writable | ProgressOutput> = [process.stdout, process.stderr]): void {
    this.finish()
    if (!bench || this.out === null) return
    this.running = true
    if (this.options.live ?? isLiveTerminal(this.out, process.env)) {
      this.live = new LiveLines(this.out)
      this.live.watch([this.out, ...terminal.filter((s) => (s as { isTTY?: boolean }).isTTY === true)])
    }
    this.ticker = setInterval(() => this.tick(), TICK_MS)
    this.ticker.unref()
  }

  /** One event from a worker; `source` is its connection, whose lines go when it closes. */
  receive(event: ProgressEvent, source: unknown = null): void {
    if (!this.running) return
    const key = keyOf(event)
    const now = this.clock()
    const before = this.entries.get(key)
    const phaseSince = before !== undefined && before.event.phase.phase === event.phase.phase ? before.phaseSince : event.atMs
    const entry = { event, source, phaseSince }
    if (FINAL_PHASES.has(event.phase.phase)) {
      this.entries.delete(key)
      this.throttle.forget(key)
      if (this.live === null) this.print(entry, now)
    } else {
      this.entries.set(key, entry)
      if (this.live === null && this.throttle.due(key, event.phase.phase, now)) this.print(entry, now)
    }
    this.showLive(now)
  }

  private accept(socket: Socket): void {
    socket.unref()
    socket.setEncoding('utf8')
    let buffered = ''
    socket.on('data', (chunk: string) => {
      buffered += chunk
      for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
        const line = buffered.slice(0, end)
        buffered = buffered.slice(end + 1)
        this.receiveLine(line, socket)
      }
    })
    socket.on('error', () => {})
    // A worker that ended (or crashed) mid-cell leaves no line behind.
    socket.on('close', () => this.forgetSource(socket))
  }

  private receiveLine(line: string, source: Socket): void {
    let json: unknown
    try {
      json = JSON.parse(line)
    } catch {
      return
    }
    const event = ProgressEvent.safeParse(json)
    if (event.success) this.receive(event.data, source)
  }

  private forgetSource(source: unknown): void {
    for (const [key, entry] of this.entries) {
      if (entry.source !== source) continue
      this.entries.delete(key)
      this.throttle.forget(key)
    }
    this.showLive(this.clock())
  }

  private lineOf(entry: Entry, now: number): string {
    return progressLine(entry.event, { sinceEventMs: Math.max(0, now - entry.event.atMs), inPhaseMs: Math.max(0, now - entry.phaseSince) })
  }

  private print(entry: Entry, now: number): void {
    this.out?.write(`${this.lineOf(entry, now)}\n`)
  }

  private showLive(now: number): void {
    this.live?.show([...this.entries.values()].map((e) => this.lineOf(e, now)))
  }

  private tick(): void {
    const now = this.clock()
    if (this.live !== null) {
      this.showLive(now)
      return
    }
    for (const [key, entry] of this.entries) if (this.throttle.due(key, entry.event.phase.phase, now)) this.print(entry, now)
  }

  private finish(): void {
    this.running = false
    if (this.ticker !== null) clearInterval(this.ticker)
    this.ticker = null
    this.entries.clear()
    this.live?.stop()
    this.live = null
  }

  private close(): void {
    this.finish()
    this.server?.close()
    this.server = null
    if (this.path !== null && process.platform !== 'win32') rmSync(this.path, { force: true })
    this.path = null
  }
}
