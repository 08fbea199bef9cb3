import { existsSync, mkdirSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, extname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { ServegateError } from '../errors.ts'
import { readIndex, verifyEvidence } from '../evidence/verify.ts'
import { NODE_LLAMA_CPP_MISSING, nodeLlamaCppInstalled } from '../engines/node-llama-cpp.ts'
import { expectedText } from '../gates/expected-text.ts'
import { figureLine } from '../gates/figure-line.ts'
import type { EvidenceIndex } from '../schema/evidence.ts'
import { parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'
import { interruption } from './interrupt.ts'

/** servegate's own root: the clone's, or the installed package's (`dist/cli/` is two levels down, as `src/cli/` is). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** `.ts` running from the sources, `.js` from the installed package. */
const EXT = extname(fileURLToPath(import.meta.url))
/** The demo's specs, shipped in the package: the story on the simulated engine, and the regression the gates must catch. */
const STORY = 'benchmarks/demo/story.bench.ts'
const REGRESSION = 'benchmarks/demo/regression.demo.ts'
/** The real pair on this CPU that a clone's demo adds to the story (the in-process engine, the tiny generated model). */
const CPU_PAIR = 'benchmarks/cpu-pair.bench.ts'

const DEMO_HELP = `servegate demo [--sim]

  Runs the demo's story under vitest bench, in about 15 s, and writes its evidence:
    1. a new build that decodes twice as fast wins decode and holds median time to first token;
    2. a pair whose candidate serves another model is refused;
    3. a build that decodes faster but prefills slower: the latency gate catches its regression.
  (1) and (2) are promotable evidence; (3) is written apart and is not promotable.

  (default)  in a clone of servegate: the story on the simulated engine, with the example pair on
             the embedded engine (in-process llama.cpp, the generated tiny model), into evidence/
             and evidence-regression/
  --sim      the story on the simulated engine only, from an installed package: writes the specs,
             configs and evidence under .servegate/demo/ in this directory (needs vitest)`

/** One vitest bench run of the demo: where it runs, its config, and the evidence it writes. */
interface DemoRun {
  root: string
  config: string
  evidence: string
}

/**
 * `servegate demo`: the story under `vitest bench` (its default reporter is the progress
 * display), then the regression apart (its output kept in a log), then both evidence
 * directories verified and the story in a few lines. Exits 0 when the story is promotable, the
 * regression was caught, and both verify.
 */
export async function demoCommand(argv: string[], io: CliIo, signal?: AbortSignal, cwd = process.cwd()): Promise<number> {
  const { values } = parseFlags('demo', argv, { sim: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } })
  if (values.help === true) {
    io.stdout.write(`${DEMO_HELP}\n`)
    return 0
  }
  const vitest = vitestEntry()
  const shown = shownFrom(cwd)
  const { story, regression, log } = values.sim === true ? await simDemoRuns(cwd) : cloneDemoRuns()
  io.stdout.write(
    values.sim === true
      ? `servegate demo --sim: the story on the simulated engine (specs and evidence in ${shown(story.root)})\n`
      : `servegate demo: the story on the simulated engine, and ${CPU_PAIR} on the embedded engine (node-llama-cpp, tiny generated model, 1 thread)\n`,
  )
  const storyExit = await runVitest(
    vitest,
    story,
    signal,
    (b) => io.stdout.write(b),
    (b) => io.stderr.write(b),
    io.stdout.isTTY === true,
  )
  // Ctrl-C (or SIGTERM, SIGHUP) stopped vitest: no regression run, no verdict on a story cut short.
  const stopped = (): number | null => (signal?.aborted === true ? interruption(signal).exitCode : null)
  const storyStopped = stopped()
  if (storyStopped !== null) return storyStopped
  io.stdout.write(`\nservegate demo: now a build whose prefill regressed (vitest's output in ${shown(log)})\n`)
  let output = ''
  const regressionExit = await runVitest(
    vitest,
    regression,
    signal,
    (b) => (output += b.toString()),
    (b) => (output += b.toString()),
    false,
  )
  await writeFile(log, output)
  const regressionStopped = stopped()
  if (regressionStopped !== null) return regressionStopped
  const storyIndex = await readIndex(join(story.root, story.evidence))
  const regressionIndex = await readIndex(join(regression.root, regression.evidence))
  const verified = [
    await verifyEvidence(join(story.root, story.evidence)),
    await verifyEvidence(join(regression.root, regression.evidence)),
  ]
  io.stdout.write('\nThe story\n')
  for (const line of storyLines(storyIndex)) io.stdout.write(`  ${line}\n`)
  for (const line of storyLines(regressionIndex)) io.stdout.write(`  ${line}\n`)
  const storyDir = shown(join(story.root, story.evidence))
  const regressionDir = shown(join(regression.root, regression.evidence))
  io.stdout.write(
    `\n${storyDir}/: ${storyIndex.promotion.promotable ? 'promotable' : 'NOT promotable'} · page ${storyDir}/index.html · board ${storyDir}/README.md\n` +
      `${regressionDir}/: ${regressionIndex.promotion.promotable ? 'promotable (the regression was NOT caught)' : 'not promotable: the regression was caught'}` +
      ` · page ${regressionDir}/index.html\n`,
  )
  const problems = verified.flatMap((v) => v.problems)
  io.stdout.write(
    problems.length === 0
      ? `Verified ${verified[0]?.files} + ${verified[1]?.files} files and ${verified[0]?.records} + ${verified[1]?.records} run records (servegate verify)\n`
      : `VERIFY FAILED: ${problems.join('; ')}\n`,
  )
  const told = storyExit === 0 && storyIndex.promotion.promotable && regressionExit !== 0 && !regressionIndex.promotion.promotable
  return told && problems.length === 0 ? 0 : 1
}

/** vitest's CLI, resolved from servegate's own place (the clone's, or the project's node_modules). */
function vitestEntry(): string {
  try {
    return join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', 'servegate demo runs its specs under vitest, which is not installed here: npm i -D vitest', {
      cause: error,
    })
  }
}

/** A clone's demo: its committed configs, the story with the CPU pair, then the regression. */
function cloneDemoRuns(): { story: DemoRun; regression: DemoRun; log: string } {
  if (!existsSync(join(ROOT, 'benchmarks/demo/story.config.ts'))) {
    throw new ServegateError(
      'CONFIG_INVALID',
      'servegate demo without --sim adds the example pair of a clone of the servegate repository (npm ci && npm run demo there); ' +
        'here, npx servegate demo --sim tells the same story on the simulated engine, and npx servegate init writes a first suite',
    )
  }
  if (!nodeLlamaCppInstalled())
    throw new ServegateError('ENGINE_NOT_FOUND', `servegate demo: ${NODE_LLAMA_CPP_MISSING}; or run servegate demo --sim`)
  mkdirSync(join(ROOT, '.servegate'), { recursive: true })
  return {
    story: { root: ROOT, config: join(ROOT, 'benchmarks/demo/story.config.ts'), evidence: 'evidence' },
    regression: { root: ROOT, config: join(ROOT, 'benchmarks/demo/regression.config.ts'), evidence: 'evidence-regression' },
    log: join(ROOT, '.servegate/demo-regression.log'),
  }
}

/**
 * The simulated-engine demo anywhere servegate is installed: the package's story and regression
 * specs, copied under `<cwd>/.servegate/demo/` with their import pointed at this servegate, and a
 * vitest config for each.
 */
async function simDemoRuns(cwd: string): Promise<{ story: DemoRun; regression: DemoRun; log: string }> {
  const dir = join(cwd, '.servegate', 'demo')
  await mkdir(dir, { recursive: true })
  const entry = JSON.stringify(fileURLToPath(new URL(`../index${EXT}`, import.meta.url)))
  const plugin = JSON.stringify(fileURLToPath(new URL(`../vitest/index${EXT}`, import.meta.url)))
  const runs: DemoRun[] = []
  for (const [spec, evidence] of [
    [STORY, 'evidence'],
    [REGRESSION, 'evidence-regression'],
  ] as const) {
    const name = spec.slice(spec.lastIndexOf('/') + 1)
    const text = await readFile(join(ROOT, spec), 'utf8')
    const pointed = text.replace("from '../../src/index.ts'", `from ${entry}`)
    if (pointed === text)
      throw new ServegateError('INTERNAL', `${spec} no longer imports '../../src/index.ts'; the demo cannot point it at servegate`)
    await writeFile(join(dir, name), pointed)
    const config = join(dir, `${name.split('.')[0]}.config.mjs`)
    await writeFile(
      config,
      `// Written by servegate demo --sim.\nimport { servegate } from ${plugin}\n\n` +
        `export default { plugins: [servegate({ evidenceDir: '${evidence}', benchInclude: ['${name}'] })] }\n`,
    )
    runs.push({ root: dir, config, evidence })
  }
  return { story: runs[0] as DemoRun, regression: runs[1] as DemoRun, log: join(dir, 'regression.log') }
}

/** Runs one vitest bench of the demo; its exit code (1 when a test failed). */
async function runVitest(
  vitest: string,
  run: DemoRun,
  signal: AbortSignal | undefined,
  out: (b: Buffer) => void,
  err: (b: Buffer) => void,
  colour: boolean,
): Promise<number> {
  // vitest colours its output on a terminal; piped into a log or a test it must not.
  const env: Record<string, string | undefined> = { ...process.env }
  if (colour) env.FORCE_COLOR = '1'
  else {
    delete env.FORCE_COLOR
    env.NO_COLOR = '1'
  }
  const child = execa(process.execPath, [vitest, 'bench', '--run', '--root', run.root, '--config', run.config], {
    cwd: run.root,
    stdout: 'pipe',
    stderr: 'pipe',
    cleanup: true,
    forceKillAfterDelay: 5000,
    reject: false,
    cancelSignal: signal,
    env,
    extendEnv: false,
  })
  child.stdout.on('data', out)
  child.stderr.on('data', err)
  const result = await child
  return result.exitCode ?? 1
}

/**
 * Each cell of an evidence directory, then its pair checks and each gate's decisive figure (the
 * line vitest's output shows under the test); a `.not` that held is shown as expected.
 */
function storyLines(index: EvidenceIndex): string[] {
  // By spec file (in declaration order within one), whichever file vitest ran first.
  const cells = [...index.cells].sort((a, b) => a.file.localeCompare(b.file))
  return cells.flatMap((cell) => {
    const checks = cell.checks.map((k) =>
      k.isNot && k.testPassed
        ? `${k.check}: ${expectedText(k.check)} (${k.findings[0] ?? 'not matched'})`
        : `${k.check}: ${k.passed ? 'held' : 'NOT held'}`,
    )
    const gates = index.gates.filter((g) => g.cell === cell.id).map((g) => figureLine(g))
    return [`${cell.id}: ${cell.disposition}${cell.required ? '' : ' (not required)'}`, ...[...checks, ...gates].map((l) => `  ${l}`)]
  })
}

/** A path as the user reads it: relative to where they ran the command. */
function shownFrom(cwd: string): (path: string) => string {
  return (path) => relative(cwd, path) || '.'
}
