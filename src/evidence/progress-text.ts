/**
 * Progress lines, as data → string: the text of a cell's phase, the throttle of plain (CI)
 * lines, and the terminal sequences that redraw live lines in place. Used by the progress
 * reporter in vitest's main process and by `servegate run`; imports only schemas.
 */
import { formatSeconds, formatWholeSeconds } from '../number-format.ts'
import type { CellPhase, PhaseName, ProgressEvent } from '../schema/progress.ts'

/** How long a line's figures have run on since its event arrived, ms. */
export interface PhaseClock {
  /** Since the event arrived: added to the elapsed times it carries. */
  sinceEventMs: number
  /** Since its phase began (its first event of that phase arrived). */
  inPhaseMs: number
}

const ESC = '\u001b['

/**
 * One phase in words; `engine` is the engine's name in the spec (or the CLI's config).
 * @example phaseText({ phase: 'waiting', elapsedMs: 45_000, timeoutMs: 900_000, logPath: 'x.log' }, 'vllm:Qwen/Qwen3-8B', { sinceEventMs:
 * 0, inPhaseMs: 0 })
 * // 'waiting for vllm:Qwen/Qwen3-8B to become ready: 45 s of 900 s, log x.log'
 */
export function phaseText(p: CellPhase, engine: string, t: PhaseClock): string {
  const inPhase = formatWholeSeconds(t.inPhaseMs)
  switch (p.phase) {
    case 'launching':
      return `launching ${engine} (${inPhase})`
    case 'waiting':
      return (
        `waiting for ${engine} to become ready: ${formatWholeSeconds(p.elapsedMs + t.sinceEventMs)} ` +
        `of ${formatWholeSeconds(p.timeoutMs)}, log ${p.logPath}`
      )
    case 'inspecting':
      return `${engine} is ready; reading its version and model fingerprint (${inPhase})`
    case 'turn':
      return `waiting for its turn at stage ${p.stage} of ${p.stages} (${inPhase})`
    case 'calibrating':
      return `calibrating prompt sizes with ${engine}'s tokenizer (${inPhase})`
    case 'warmup':
      return `warm-up: ${p.done}/${p.total} requests (${inPhase})`
    case 'requests': {
      const elapsedMs = p.elapsedMs + (p.done < p.total ? t.sinceEventMs : 0)
      const stage = p.stage === null ? '' : `, stage ${p.stage.index} of ${p.stage.of}`
      return `${p.done}/${p.total} requests, ${p.ok} ok, ${p.failed} failed, ${formatSeconds(elapsedMs, 1)}${stage}`
    }
    case 'tearing-down':
      return `tearing down ${engine} (${inPhase})`
    case 'done':
      return p.failure === null
        ? `measured: ${p.completed} ok, ${p.failed === null ? 'failed unknown' : `${p.failed} failed`}`
        : `failed: ${p.failure}`
    case 'stopped':
      return `${engine} stopped`
  }
}

/** Who the line is about: `alpha · baseline · launch 2/4`; empty for an engine's teardown after the file. */
function progressLabel(e: Pick<ProgressEvent, 'cell' | 'arm' | 'step'>): string {
  const step =
    e.step === null
      ? null
      : e.step.kind === 'launch'
        ? `launch ${e.step.index}/${e.step.of}`
        : `probe ${e.step.index} at ${e.step.axis === 'rate' ? `${e.step.value.toFixed(2)} req/s` : `${e.step.value} streams`}`
  return [e.cell, e.arm, step].filter((part) => part !== null).join(' · ')
}

/**
 * A cell's progress line.
 * @example progressLine(event, clock) // 'servegate alpha · baseline: 5/12 requests, 5 ok, 0 failed, 1.2 s'
 */
export function progressLine(e: ProgressEvent, t: PhaseClock): string {
  const label = progressLabel(e)
  return `servegate${label === '' ? '' : ` ${label}`}: ${phaseText(e.phase, e.engine, t)}`
}

/**
 * When plain (CI) lines are due: a line on every change of phase, and while the phase stays
 * the same at most one every `intervalMs` per cell. The caller passes the time, so a test
 * drives it with its own clock.
 */
export class LineThrottle {
  private readonly last = new Map<string, { phase: PhaseName; atMs: number }>()
  private readonly intervalMs: number

  /** @param intervalMs the least time between two lines of one cell in one phase, ms @default 5000 */
  constructor(intervalMs = 5000) {
    this.intervalMs = intervalMs
  }

  /** Whether a line of `key` in `phase` is due at `nowMs`; a due line counts as printed. */
  due(key: string, phase: PhaseName, nowMs: number): boolean {
    const last = this.last.get(key)
    if (last !== undefined && last.phase === phase && nowMs - last.atMs < this.intervalMs) return false
    this.last.set(key, { phase, atMs: nowMs })
    return true
  }

  /** The cell's line went away: its next line is due whatever its phase. */
  forget(key: string): void {
    this.last.delete(key)
  }
}

/** Terminal rows a line takes at `columns` (it wraps; an empty line still takes one). */
export function rowsOf(line: string, columns: number): number {
  return Math.max(1, Math.ceil(line.length / Math.max(1, columns)))
}

/** Moves up over the `rows` rows drawn last (the cursor below them) and erases them and all below. */
export function eraseRows(rows: number): string {
  return rows > 0 ? `${ESC}${rows}A\r${ESC}J` : ''
}

/**
 * Replaces the `rows` rows drawn last with `lines`, each ending in a newline (the cursor stays
 * below them, where other output continues). Returns the sequence and the rows it now takes.
 */
export function redraw(rows: number, lines: readonly string[], columns: number): { text: string; rows: number } {
  return {
    text: eraseRows(rows) + lines.map((line) => `${line}\n`).join(''),
    rows: lines.reduce((sum, line) => sum + rowsOf(line, columns), 0),
  }
}

/**
 * Whether progress is drawn live (lines redrawn in place) rather than printed as plain lines:
 * on a terminal, outside CI (vitest draws its own live summary under the same rule).
 */
export function isLiveTerminal(stream: { isTTY?: boolean }, env: Record<string, string | undefined>): boolean {
  const ci = env.CI !== undefined && env.CI !== '' && env.CI !== '0' && env.CI.toLowerCase() !== 'false'
  return stream.isTTY === true && !ci
}
