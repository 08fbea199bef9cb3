import { readFileSync } from 'node:fs'

/**
 * Peak resident set of this process, MB: VmHWM of `/proc/self/status` where there is one. Not
 * `resourceUsage().maxRSS`: Linux carries the peak of the image before exec into it, so a child
 * of a bench would report the bench's own. Plain JavaScript: `cell-run.js`, which has no
 * TypeScript stripper in its process, reads it too.
 * @returns {number}
 */
export function peakRssMB() {
  try {
    const kb = /^VmHWM:\s*(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]
    if (kb !== undefined) return Number(kb) / 1024
  } catch {
    // No procfs: fall back to getrusage.
  }
  return process.resourceUsage().maxRSS / 1024
}
