import { phaseText, redraw } from '../evidence/progress-text.ts'
import { formatSeconds } from '../number-format.ts'
import type { CellPhase, PhaseListener } from '../schema/progress.ts'
import type { CliIo } from './cli-io.ts'

const BAR_WIDTH = 24

function requestsBar(p: Extract<CellPhase, { phase: 'requests' }>): string {
  const filled = p.total === 0 ? BAR_WIDTH : Math.round((p.done / p.total) * BAR_WIDTH)
  const bar = `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}]`
  return `${bar} ${p.done}/${p.total} · ${p.ok} ok · ${p.failed} failed · ${formatSeconds(p.elapsedMs, 1)}`
}

/**
 * A one-line progress display on a TTY: the cell's phase (launching `engine`, waiting for it to
 * become ready with its log file, calibrating, warm-up, then a bar of the measured requests),
 * redrawn in place at most every 100 ms and on each change of phase; silent otherwise.
 */
export function progressLine(io: CliIo, engine: string): PhaseListener {
  const tty = io.stderr.isTTY === true
  let last = 0
  let current: CellPhase['phase'] | null = null
  let since = 0
  let rows = 0
  return (p) => {
    if (!tty) return
    const now = performance.now()
    const changed = p.phase !== current
    const finished = p.phase === 'requests' && p.done === p.total
    if (!changed && !finished && now - last < 100) return
    if (changed) since = now
    current = p.phase
    last = now
    const text = p.phase === 'requests' ? requestsBar(p) : phaseText(p, engine, { sinceEventMs: 0, inPhaseMs: now - since })
    // Each draw ends in a newline, so the last one stays above whatever the command prints next.
    const drawn = redraw(rows, [text], (io.stderr as { columns?: number }).columns || 80)
    io.stderr.write(drawn.text)
    rows = drawn.rows
  }
}
