import type { CellProgress } from '../runner/cell.ts'
import type { CliIo } from './io.ts'

/** A one-line progress display on a TTY (redrawn at most every 100 ms); silent otherwise. */
export function progressLine(io: CliIo): { update(p: CellProgress): void; done(): void } {
  const tty = io.stderr.isTTY === true
  let last = 0
  let drawn = false
  return {
    update(p) {
      if (!tty) return
      const now = performance.now()
      if (now - last < 100 && p.done < p.total) return
      last = now
      drawn = true
      const width = 24
      const filled = Math.round((p.done / p.total) * width)
      io.stderr.write(
        `\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${p.done}/${p.total} · ${p.ok} ok · ${p.failed} failed · ${(p.elapsedMs / 1000).toFixed(1)} s `,
      )
    },
    done() {
      if (drawn) io.stderr.write('\n')
    },
  }
}
