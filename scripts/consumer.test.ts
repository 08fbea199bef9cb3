/**
 * servegate as a user installs it: the packed tarball and vitest from the registry in a fresh
 * project outside this repository, then what the README teaches, run with `npx` there:
 * `servegate init` and its suite under `vitest bench`, the evidence verified, matchers on subjects
 * built from a measured pair (its arms swapped, one arm) verified as promotable, the README's own
 * spec run and type-checked against the shipped `.d.ts`, `servegate run` against
 * `servegate sim`, and the UI command serving the benchmark suite.
 */
import { existsSync } from 'node:fs'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { consumerEnv, diskUsage, emptyProject, FOOTPRINT_TARGET_BYTES, inProject, npmInstall, packTarball, REPO } from './consumer.ts'

let packDir: string
let project: string
let footprint: { bytes: number; files: number }

/** The README's code blocks that a `<!-- consumer: PATH -->` line names: written to PATH in the project. */
export function readmeFiles(readme: string): Array<{ path: string; content: string }> {
  const files: Array<{ path: string; content: string }> = []
  const marker = /<!-- consumer: (\S+) -->\s*\n```\w*\n([\s\S]*?)```/g
  for (const m of readme.matchAll(marker)) files.push({ path: m[1] as string, content: m[2] as string })
  return files
}

/** Where the consumer project gets `SUBJECTS_SPEC`. */
const SUBJECTS_SPEC_PATH = 'benchmarks/subjects.bench.ts'
/** The vitest config that runs `SUBJECTS_SPEC` as a suite of its own, and where it writes its evidence. */
const SUBJECTS_CONFIG = 'vitest.subjects.config.mjs'
const SUBJECTS_EVIDENCE = 'evidence-subjects'
const SUBJECTS_CONFIG_TEXT = `import { defineConfig } from 'vitest/config'
import { servegate } from 'servegate/vitest'

export default defineConfig({
  plugins: [servegate({ evidenceDir: '${SUBJECTS_EVIDENCE}', benchInclude: ['${SUBJECTS_SPEC_PATH}'] })],
})
`

/**
 * A spec that hands the matchers subjects built from one measured pair: its arms swapped (the
 * baseline must not win decode over the candidate, and the pair is matched either way round) and
 * its candidate arm alone (a TTFT objective). Both arms are servegate's simulated engine, the
 * candidate twice as fast.
 */
const SUBJECTS_SPEC = `import { expect, test } from 'vitest'
import { engine, pair } from 'servegate'

const model = { id: 'sim/subjects', revision: null }
const p = pair({
  id: 'sim-subjects',
  baseline: engine.sim({ name: 'sim-slow', model, sim: { decodeTokPerS: 100, prefillTokPerS: 10_000 } }),
  candidate: engine.sim({ name: 'sim-fast', model, sim: { decodeTokPerS: 200, prefillTokPerS: 20_000 } }),
  concurrency: 4,
  requests: 32,
  warmupRequests: 4,
  maxTokens: 32,
  workload: { promptTokens: 256, seed: 17, outputControl: { mode: 'strict' } },
})

test('is a matched pair with its arms swapped', async () => {
  const r = await p
  expect({ ...r, baseline: r.candidate, candidate: r.baseline }).toBeMatchedPair()
})

test('the baseline does not win decode over the candidate', async () => {
  const r = await p
  expect({ ...r, baseline: r.candidate, candidate: r.baseline }).not.toWinDecode({ margin: 0.1 })
})

// On a busy machine the client may limit the cell, and the objective is then left undecided: passed by its policy.
test('the candidate arm alone meets a TTFT objective', async () => {
  const r = await p
  expect({ kind: 'cell', id: r.id, record: r.candidate[0], records: r.candidate }).toMeetSLO({
    ttftMs: 10_000,
    percentile: 50,
    inconclusive: 'pass',
  })
})
`

beforeAll(async () => {
  packDir = await emptyProject('servegate-pack-')
  project = await emptyProject()
  const tarball = await packTarball(packDir)
  // What the README's install line installs, and nothing else: its footprint is measured here.
  await npmInstall(project, [tarball, 'vitest@^5.1.2'])
  footprint = await diskUsage(join(project, 'node_modules'))
}, 600_000)

afterAll(async () => {
  await rm(packDir, { recursive: true, force: true })
  await rm(project, { recursive: true, force: true })
})

describe('installed from the packed tarball', () => {
  test(`npm i -D servegate vitest stays within ${FOOTPRINT_TARGET_BYTES / 1024 / 1024} MB and brings no node-llama-cpp`, () => {
    expect(footprint.bytes).toBeLessThanOrEqual(FOOTPRINT_TARGET_BYTES)
    expect(existsSync(join(project, 'node_modules', 'node-llama-cpp'))).toBe(false)
    expect(existsSync(join(project, 'node_modules', 'servegate', 'src'))).toBe(false)
    expect(existsSync(join(project, 'node_modules', 'servegate', 'dist', 'index.d.ts'))).toBe(true)
  })

  test('npx servegate runs the compiled CLI; the in-process engine names its install command', async () => {
    const help = await inProject(project, 'npx', ['servegate', '--help'])
    expect(help.exitCode, help.stderr).toBe(0)
    expect(help.stdout).toMatch(/servegate init/)
    const demo = await inProject(project, 'npx', ['servegate', 'demo'])
    expect(demo.exitCode).toBe(2)
    expect(demo.stderr).toMatch(/npx servegate init/)
    expect(demo.stderr).toMatch(/npx servegate demo --sim/)
    const script = "import { engine } from 'servegate'; engine.nodeLlamaCpp({ model: { id: 'm', path: 'm.gguf' } })"
    const missing = await inProject(project, process.execPath, ['--input-type=module', '-e', script])
    expect(missing.exitCode).not.toBe(0)
    expect(missing.stderr).toMatch(/npm i -D node-llama-cpp@3\.21\.1/)
  })

  test('npx servegate demo --sim tells its story from the installed package: promotable evidence, and a regression caught apart', async () => {
    const demo = await inProject(project, 'npx', ['servegate', 'demo', '--sim'], { timeout: 300_000 })
    expect(demo.exitCode, `${demo.stdout.slice(-4000)}\n${demo.stderr.slice(-3000)}`).toBe(0)
    expect(demo.stdout).toMatch(/^\.servegate\/demo\/evidence\/: promotable/m)
    expect(demo.stdout).toMatch(/^\.servegate\/demo\/evidence-regression\/: not promotable: the regression was caught/m)
    const verify = await inProject(project, 'npx', ['servegate', 'verify', '.servegate/demo/evidence', '--require-promotable'])
    expect(verify.exitCode, verify.stdout + verify.stderr).toBe(0)
  }, 400_000)

  test('npx servegate init gives a suite that passes under vitest bench without a GPU, and its evidence verifies', async () => {
    const init = await inProject(project, 'npx', ['servegate', 'init'])
    expect(init.exitCode, init.stderr).toBe(0)
    for (const file of ['benchmarks/serving.bench.ts', '.github/workflows/servegate.yml', '.gitignore'])
      expect(existsSync(join(project, file)), file).toBe(true)
    const bench = await inProject(project, 'npx', ['vitest', 'bench', '--run'], { timeout: 300_000 })
    expect(bench.exitCode, `${bench.stdout.slice(-3000)}\n${bench.stderr.slice(-3000)}`).toBe(0)
    // Each cell said what it was doing (plain lines: the output is not a terminal).
    expect(bench.stdout).toMatch(/servegate .+: waiting for sim-baseline to become ready: \d+ s of 30 s, log \S+\.log/)
    expect(bench.stdout).toMatch(/servegate .+ · candidate: measured: \d+ ok, 0 failed/)
    const index = JSON.parse(await readFile(join(project, 'evidence', 'index.json'), 'utf8')) as {
      promotion: { promotable: boolean }
      cells: Array<{ file: string; disposition: string }>
    }
    expect(index.cells.map((c) => [c.file, c.disposition])).toEqual([['benchmarks/serving.bench.ts', 'accepted']])
    expect(index.promotion.promotable).toBe(true)
    const verify = await inProject(project, 'npx', ['servegate', 'verify', 'evidence', '--require-promotable'])
    expect(verify.exitCode, verify.stdout + verify.stderr).toBe(0)
    // init never overwrites what is there
    const again = await inProject(project, 'npx', ['servegate', 'init'])
    expect(again.exitCode).toBe(0)
    expect(again.stdout).toMatch(/skipped/)
  }, 400_000)

  test('matchers on subjects built from a measured pair (arms swapped, one arm) pass, and the evidence verifies as promotable', async () => {
    await writeFile(join(project, SUBJECTS_SPEC_PATH), SUBJECTS_SPEC)
    // A suite of its own, run whole: one file of the project's suite alone would be a partial run,
    // never promotable, written beside the complete evidence init's suite left.
    await writeFile(join(project, SUBJECTS_CONFIG), SUBJECTS_CONFIG_TEXT)
    const bench = await inProject(project, 'npx', ['vitest', 'bench', '--run', '--config', SUBJECTS_CONFIG], { timeout: 300_000 })
    expect(bench.exitCode, `${bench.stdout.slice(-3000)}\n${bench.stderr.slice(-3000)}`).toBe(0)
    const index = JSON.parse(await readFile(join(project, SUBJECTS_EVIDENCE, 'index.json'), 'utf8')) as {
      promotion: { promotable: boolean }
      cells: Array<{
        id: string
        disposition: string
        arms: Array<{ arm: string; record: { path: string } }>
        checks: Array<{ check: string; passed: boolean; judged: unknown }>
      }>
      gates: Array<{ cell: string; isNot: boolean; testPassed: boolean; decision: { gate: string }; judged: unknown }>
    }
    expect(index.cells.map((c) => [c.id, c.disposition])).toEqual([['sim-subjects', 'accepted']])
    const runIdOf = async (arm: string): Promise<string> => {
      const path = index.cells[0]?.arms.find((a) => a.arm === arm)?.record.path ?? ''
      return (JSON.parse(await readFile(join(project, SUBJECTS_EVIDENCE, path), 'utf8')) as { runId: string }).runId
    }
    const [baseline, candidate] = [await runIdOf('baseline'), await runIdOf('candidate')]
    // Each gate records the records it judged in the roles the spec gave them, not the cell's order.
    expect(index.gates.map((g) => [g.decision.gate, g.cell, g.isNot, g.testPassed, g.judged])).toEqual([
      ['toWinDecode', 'sim-subjects', true, true, { kind: 'pair', baseline: [candidate], candidate: [baseline], storedBaseline: null }],
      ['toMeetSLO', 'sim-subjects', false, true, { kind: 'cell', records: [candidate] }],
    ])
    expect(index.cells[0]?.checks.map((k) => [k.check, k.passed, k.judged])).toEqual([
      ['toBeMatchedPair', true, { kind: 'pair', baseline: [candidate], candidate: [baseline], storedBaseline: null }],
    ])
    expect(index.promotion.promotable).toBe(true)
    const verify = await inProject(project, 'npx', ['servegate', 'verify', SUBJECTS_EVIDENCE, '--require-promotable'])
    expect(verify.exitCode, verify.stdout + verify.stderr).toBe(0)
  }, 400_000)

  test("the README's own spec runs under vitest bench, and it and the generated suite type-check against the shipped types", async () => {
    const files = readmeFiles(await readFile(join(REPO, 'README.md'), 'utf8'))
    expect(files.map((f) => f.path)).toContain('benchmarks/first-pair.bench.ts')
    for (const f of files) {
      await mkdir(join(project, f.path, '..'), { recursive: true })
      await writeFile(join(project, f.path), f.content)
    }
    const bench = await inProject(project, 'npx', ['vitest', 'bench', '--run', 'benchmarks/first-pair.bench.ts'], { timeout: 300_000 })
    expect(bench.exitCode, `${bench.stdout.slice(-3000)}\n${bench.stderr.slice(-3000)}`).toBe(0)

    // First with only what servegate init and the README install (and TypeScript): no @types/node,
    // so a spec that leans on Node's globals fails here. Errors inside node_modules are its
    // packages' own (skipLibCheck, as tsc --init sets it).
    await npmInstall(project, ['typescript@~6.0.3'])
    expect(existsSync(join(project, 'node_modules', '@types', 'node')), '@types/node came with the install').toBe(false)
    const bareConfig = {
      compilerOptions: {
        target: 'ES2023',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
      },
      include: ['benchmarks', 'vitest.config.*'],
    }
    await writeFile(join(project, 'tsconfig.json'), JSON.stringify(bareConfig, null, 2))
    const bare = await inProject(project, 'npx', ['tsc', '-p', 'tsconfig.json'])
    expect(bare.exitCode, bare.stdout + bare.stderr).toBe(0)

    await npmInstall(project, ['@types/node@^24'])
    const tsconfig = {
      compilerOptions: {
        target: 'ES2023',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        types: ['node'],
        skipLibCheck: false,
      },
      include: ['benchmarks', 'vitest.config.*'],
    }
    await writeFile(join(project, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2))
    const tsc = await inProject(project, 'npx', ['tsc', '-p', 'tsconfig.json'])
    expect(tsc.exitCode, tsc.stdout + tsc.stderr).toBe(0)
  }, 400_000)

  test('npx servegate run measures npx servegate sim, both from node_modules', async () => {
    // Its own process group: npx runs the bin in a child, and the whole tree must stop.
    const sim = execa('npx', ['servegate', 'sim', '--port', '0', '--model', 'sim-model'], {
      cwd: project,
      env: consumerEnv(),
      extendEnv: false,
      cleanup: true,
      forceKillAfterDelay: 2000,
      reject: false,
      detached: true,
    })
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let seen = ''
        const timer = setTimeout(() => reject(new Error(`servegate sim did not start: ${seen}`)), 30_000)
        sim.stdout?.on('data', (b: Buffer) => {
          seen += b.toString()
          const m = /listening on (http:\/\/\S+)/.exec(seen)
          if (m !== null) {
            clearTimeout(timer)
            resolve(m[1] as string)
          }
        })
      })
      const run = await inProject(project, 'npx', [
        'servegate',
        'run',
        '--base-url',
        url,
        '--model',
        'sim-model',
        '--requests',
        '8',
        '--concurrency',
        '2',
        '--max-tokens',
        '16',
        '--out',
        'run.json',
      ])
      expect(run.exitCode, run.stderr).toBe(0)
      const record = JSON.parse(await readFile(join(project, 'run.json'), 'utf8')) as {
        schema: string
        requests: Array<{ status: string }>
      }
      expect(record.schema).toBe('servegate.run/v1')
      expect(record.requests.filter((r) => r.status === 'ok')).toHaveLength(8)
    } finally {
      if (sim.pid !== undefined) process.kill(-sim.pid, 'SIGTERM')
      await sim
    }
  }, 120_000)

  test('npx vitest bench --ui --watch serves @vitest/ui over the benchmark suite', async () => {
    await npmInstall(project, ['@vitest/ui@^5.1.2'])
    await rm(join(project, 'evidence'), { recursive: true, force: true })
    const ui = execa('npx', ['vitest', 'bench', '--ui', '--watch', '--open=false', '--api.port=0', 'benchmarks/serving.bench.ts'], {
      cwd: project,
      env: consumerEnv(),
      extendEnv: false,
      cleanup: true,
      forceKillAfterDelay: 2000,
      reject: false,
      detached: true,
    })
    try {
      let out = ''
      ui.stdout?.on('data', (b: Buffer) => (out += b.toString()))
      ui.stderr?.on('data', (b: Buffer) => (out += b.toString()))
      // The page needs the session token the URL carries.
      const url = await waitFor(
        () => /UI started at (http:\/\/[\w.:[\]-]+\/__vitest__\/\?token=[\w-]+)/.exec(out)?.[1] ?? null,
        60_000,
        () => out,
      )
      // The token URL sets the session cookie and redirects to the page, which needs it.
      const login = await fetch(url, { redirect: 'manual' })
      expect(login.status).toBe(302)
      const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
      const page = await fetch(new URL(login.headers.get('location') ?? '/__vitest__/', url), { headers: { cookie } })
      expect(page.status).toBe(200)
      expect(await page.text()).toMatch(/<html/i)
      // The UI's run is the benchmark suite: its evidence is written as after `vitest bench --run`.
      await waitFor(
        () => (existsSync(join(project, 'evidence', 'index.json')) ? true : null),
        120_000,
        () => out,
      )
      const index = JSON.parse(await readFile(join(project, 'evidence', 'index.json'), 'utf8')) as { cells: Array<{ file: string }> }
      expect(index.cells.map((c) => c.file)).toEqual(['benchmarks/serving.bench.ts'])
    } finally {
      // The whole tree: npx, vitest and its workers (the UI server must not outlive the test).
      if (ui.pid !== undefined) process.kill(-ui.pid, 'SIGTERM')
      await ui
    }
  }, 240_000)

  test('a spec whose dataset is missing fails when it is declared: one line naming the path and the fix, and no engine starts', async () => {
    const pids = join(project, 'missing-dataset.pids')
    const spec = 'benchmarks/missing-dataset.bench.ts'
    // Fake vLLM engines that write their pid the moment they are launched: none may be.
    await writeFile(
      join(project, spec),
      `import { expect, test } from 'vitest'
import { engine, pair } from 'servegate'

const fake = (name: string) =>
  engine.vllm({ name, executable: ${JSON.stringify(join(REPO, 'fixtures/fakes/vllm'))}, model: { id: 'fake/m' }, env: { FAKE_ENGINE_PIDFILE: ${JSON.stringify(pids)} } })
const p = pair({ id: 'qa', baseline: fake('a'), candidate: fake('b'), workload: { kind: 'dataset', datasetPath: 'data/missing.jsonl' } })

test('wins decode', async () => expect(await p).toWinDecode({ margin: 0.05 }))
`,
    )
    try {
      const bench = await inProject(project, 'npx', ['vitest', 'bench', '--run', spec], { timeout: 120_000 })
      const out = `${bench.stdout}\n${bench.stderr}`
      expect(bench.exitCode, out.slice(-3000)).toBe(1)
      expect(existsSync(pids), 'an engine was launched').toBe(false)
      const lines = out.split('\n').filter((line) => line.includes('ServegateError'))
      expect(lines).toEqual([
        `ServegateError [FILE_INVALID]: pair "qa".workload.datasetPath: data/missing.jsonl: cannot read the dataset ` +
          `(ENOENT: no such file ${join(project, 'data/missing.jsonl')}); check the path`,
      ])
      // No frame of servegate's own, compiled or mapped back to its sources.
      expect(out).not.toMatch(/node_modules\/servegate\/(src|dist)\//)
    } finally {
      await rm(join(project, spec), { force: true })
    }
  }, 180_000)
})

async function waitFor<T>(probe: () => T | null, timeoutMs: number, context: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = probe()
    if (value !== null) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms:\n${context().slice(-3000)}`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}
