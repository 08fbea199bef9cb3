import { readdir, readFile, readlink } from 'node:fs/promises'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { expect } from 'vitest'
import { missingLines, quotedOutput } from '../../fixtures/docs-quotes.ts'
import { test } from '../../fixtures/test-context.ts'
import { EvidenceIndex } from '../schema/evidence.ts'
import { demoCommand } from './demo.ts'
import { Interrupted } from './interrupt.ts'

/** The processes whose working directory is under `dir`: an engine a cell launched there and left running. */
async function processesUnder(dir: string): Promise<number[]> {
  const found: number[] = []
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => null)
    if (cwd !== null && cwd.startsWith(dir)) found.push(Number(entry))
  }
  return found
}

async function runDemo(argv: string[], cwd?: string): Promise<{ code: number; out: string }> {
  const stdout = new PassThrough()
  let out = ''
  stdout.on('data', (b: Buffer) => (out += b.toString()))
  const code = await demoCommand(argv, { stdout, stderr: new PassThrough() }, undefined, cwd)
  return { code, out }
}

/**
 * What moves from run to run, masked, so a quote is held to everything else: the percentages, and
 * a latency hold's outcome (decided on a quiet machine; a loaded one may leave it inconclusive,
 * which passes as a non-regression).
 */
const maskPercentages = (text: string) =>
  text.replace(/[+-]?\d+(\.\d+)?%/g, '#%').replace(/^( +toHoldLatency demo-decode-kernel: .*): (pass|inconclusive) \(/gm, '$1: # (')

/** Each run record's harness reasons, for a failure message. */
async function harnessReasons(dir: string): Promise<string> {
  const index = await readEvidence(dir)
  const lines = await Promise.all(
    index.cells.flatMap((c) =>
      c.arms.map(async (a) => {
        const record = JSON.parse(await readFile(join(dir, a.record.path), 'utf8')) as { harness: { reasons: string[] } }
        return `${c.id} ${a.arm}: ${record.harness.reasons.join('; ') || 'not limited'}`
      }),
    ),
  )
  return lines.join('\n')
}

const readEvidence = async (dir: string) => EvidenceIndex.parse(JSON.parse(await readFile(join(dir, 'index.json'), 'utf8')))

test(
  'demo --sim tells the story from any directory: a decode win that holds TTFT, an unfair pair refused, a regression caught; no engine left',
  { timeout: 300_000 },
  async ({ tmpDir }) => {
    const { code, out } = await runDemo(['--sim'], tmpDir)
    // On failure, the demo's own output says which part of the story did not hold.
    expect(code, out.slice(-6000)).toBe(0)
    const demo = join(tmpDir, '.servegate', 'demo')
    const story = await readEvidence(join(demo, 'evidence'))
    expect(story.promotion.promotable).toBe(true)
    expect(story.cells.map((c) => [c.id, c.disposition])).toEqual([
      ['demo-decode-kernel', 'accepted'],
      ['demo-other-model', 'failed'],
    ])
    const gate = (index: EvidenceIndex, name: string) => index.gates.find((g) => g.decision.gate === name)?.decision.outcome
    expect(gate(story, 'toWinDecode')).toBe('pass')
    // A non-regression gate: decided 'pass' on a quiet machine (0.99× [0.92×, 1.07×] here); a
    // loaded one may widen it to inconclusive, which passes with a warning. Never a fail.
    expect(gate(story, 'toHoldLatency')).not.toBe('fail')
    // No judged cell of the story is harness-limited on two cores (the refused pair's 8 requests
    // make one host stall its send-lag p99, and nothing is judged on it).
    const limited = story.cells
      .filter((c) => c.required)
      .flatMap((c) => c.arms.filter((a) => a.harnessLimited).map((a) => `${c.id} ${a.arm}`))
    expect(limited, await harnessReasons(join(demo, 'evidence'))).toEqual([])
    const regression = await readEvidence(join(demo, 'evidence-regression'))
    expect(regression.promotion.promotable).toBe(false)
    expect(gate(regression, 'toHoldLatency')).toBe('fail')
    expect(out).toMatch(
      /^ {2}demo-other-model: failed \(not required\)\n {4}toBeMatchedPair: expected mismatch ✓ \(served model: demo-model ≠ demo-model-int4/m,
    )
    expect(out).toMatch(
      /^ {4}toHoldLatency demo-prefill-regression: time to first output p50 \+\d+(\.\d+)?% \[.+\] ≤ \+10%: fail \(98% interval/m,
    )
    expect(out).toMatch(/^\.servegate\/demo\/evidence-regression\/: not promotable: the regression was caught/m)
    expect(out).toMatch(/^Verified \d+ \+ \d+ files and 4 \+ 2 run records/m)
    expect(await processesUnder(tmpDir)).toEqual([])
    // The README shows this output: its lines, counts and words hold; only the percentages move.
    const quoted = quotedOutput(await readFile(new URL('../../README.md', import.meta.url), 'utf8'), 'npx servegate demo --sim')
    expect(quoted).not.toBeNull()
    expect(missingLines(maskPercentages(quoted?.text ?? ''), maskPercentages(out))).toEqual([])
  },
)

test(
  'Ctrl-C during the story: the demo exits 130 at once, runs no regression, and leaves no engine',
  { timeout: 120_000 },
  async ({ tmpDir }) => {
    const stdout = new PassThrough()
    let out = ''
    stdout.on('data', (b: Buffer) => (out += b.toString()))
    const controller = new AbortController()
    // Once the first engine is up: the story is under way.
    const timer = setInterval(() => {
      if (/baseline: 0\/24 requests/.test(out)) controller.abort(new Interrupted('SIGINT'))
    }, 20)
    try {
      const code = await demoCommand(['--sim'], { stdout, stderr: new PassThrough() }, controller.signal, tmpDir)
      expect(code, out.slice(-3000)).toBe(130)
    } finally {
      clearInterval(timer)
    }
    expect(out).not.toMatch(/now a build whose prefill regressed/)
    // vitest's workers tear their engines down as they exit; give them the moment they take.
    const deadline = Date.now() + 15_000
    while ((await processesUnder(tmpDir)).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
    const left = await processesUnder(tmpDir)
    // Which process stayed, by its command line: the message says what was not torn down.
    const commands = await Promise.all(left.map((pid) => readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '(gone)')))
    expect(left, commands.map((c) => c.replaceAll('\0', ' ')).join('\n')).toEqual([])
  },
)

test(
  'the default demo adds the example pair on the embedded engine, and leaves verified evidence: promotable, and the regression apart',
  { timeout: 300_000 },
  async () => {
    const { code, out } = await runDemo([])
    expect(code, out.slice(-6000)).toBe(0)
    const story = await readEvidence('evidence')
    expect(story.promotion.promotable).toBe(true)
    expect(story.statistics).toMatchObject({ planned: 5, required: 3, accepted: 3, failed: 2 })
    const limited = story.cells
      .filter((c) => c.required)
      .flatMap((c) => c.arms.filter((a) => a.harnessLimited).map((a) => `${c.id} ${a.arm}`))
    expect(limited, await harnessReasons('evidence')).toEqual([])
    expect((await readEvidence('evidence-regression')).promotion.promotable).toBe(false)
    expect(out).toMatch(/^evidence\/: promotable · page evidence\/index\.html/m)
    expect(out).toMatch(/^Verified \d+ \+ \d+ files and 10 \+ 2 run records/m)
    const quoted = quotedOutput(await readFile(new URL('../../CONTRIBUTING.md', import.meta.url), 'utf8'), 'npm run demo')
    expect(quoted).not.toBeNull()
    expect(missingLines(maskPercentages(quoted?.text ?? ''), maskPercentages(out))).toEqual([])
  },
)
