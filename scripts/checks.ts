/**
 * The static checks of `npm test`, run side by side instead of one after another: the build and
 * then the type tests against it, the type check, the lint and the unused-export check (knip),
 * the format check. Each is its own package script; the scripts of one line of LINES run in
 * order, the lines at once. A line's output is printed whole when it ends, so two tools never
 * interleave; the exit code is 1 when any check failed, after every line has ended.
 *
 *     node scripts/checks.ts
 */
import { performance } from 'node:perf_hooks'
import { execa } from 'execa'

/** Lines of package scripts: in order within a line (typecheck:dist reads what build wrote), lines at once. */
const LINES: readonly (readonly string[])[] = [['build', 'typecheck:dist'], ['typecheck'], ['lint', 'knip'], ['format:check']]

/** Runs one line's scripts in order, stopping at the first that fails; its output and whether it passed. */
async function runLine(scripts: readonly string[]): Promise<{ ok: boolean; output: string }> {
  let output = ''
  for (const script of scripts) {
    const started = performance.now()
    const r = await execa('npm', ['run', '--silent', script], { all: true, reject: false, stdin: 'ignore' })
    const seconds = ((performance.now() - started) / 1000).toFixed(1)
    output += `${r.all ? `${r.all}\n` : ''}${r.exitCode === 0 ? 'ok' : `FAILED (exit ${r.exitCode})`}: npm run ${script} (${seconds} s)\n`
    if (r.exitCode !== 0) return { ok: false, output }
  }
  return { ok: true, output }
}

const results = await Promise.all(
  LINES.map(async (line) => {
    const result = await runLine(line)
    process.stdout.write(result.output)
    return result.ok
  }),
)
if (results.includes(false)) process.exitCode = 1
