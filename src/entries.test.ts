/**
 * The public surface: each package entry (package.json "exports") re-exports exactly these
 * runtime names. A name added or dropped here is a change to what users import.
 */
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { expect, test } from 'vitest'

const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as {
  exports: Record<string, string | { types: string; import: string; default: string }>
  bin: Record<string, string>
  files: string[]
}

const EXPECTED: Record<string, string[]> = {
  '.': [
    'ERROR_CODES',
    'SERVEGATE_VERSION',
    'ServegateError',
    'calibrate',
    'capacity',
    'cell',
    'engine',
    'importRunFile',
    'importRunFileRuns',
    'pair',
    'readRunRecord',
    'readRunRecords',
    'runCell',
    'startSimServer',
    'storedBaseline',
    'sweep',
  ],
  './vitest': ['BENCH_WORKER_NODE_FLAGS', 'servegate'],
  './reporter': [
    'EVIDENCE_SCHEMA_ID',
    'EvidenceIndex',
    'ServegateReporter',
    'readEvidence',
    'readIndex',
    'renderBoard',
    'verifyEvidence',
    'writeEvidence',
  ],
  './gates': [
    'DEFAULT_CONFIDENCE',
    'DEFAULT_LAUNCH_NOISE',
    'DEFAULT_SEED',
    'SUGGESTED_LOOKS',
    'accuracyGapGate',
    'bcaInterval',
    'bootstrapPairedStatistic',
    'bootstrapStatistic',
    'groupSequentialBoundaries',
    'holdLatencyGate',
    'holmAdjust',
    'mcnemarExact',
    'percentileInterval',
    'requestsHint',
    'reuseCacheGate',
    'signedRankTest',
    'sloGate',
    'sustainGate',
    'wilsonInterval',
    'winGate',
  ],
}

/**
 * The type names each entry exports beside its runtime names (a name that is both, such as a zod
 * schema, is pinned above as a runtime name). A rename here breaks every project that imports the
 * type, as surely as a runtime rename.
 */
const EXPECTED_TYPES: Record<string, string[]> = {
  '.': [
    'ArrivalSpec',
    'CalibrateSpec',
    'Calibration',
    'CapacitySearch',
    'CapacitySpec',
    'CellMetrics',
    'CellPlan',
    'CellResult',
    'CellSpec',
    'CellSweepSpec',
    'Distribution',
    'EngineConfig',
    'EngineHandle',
    'EngineKind',
    'ErrorCode',
    'ErrorInfo',
    'GateDecision',
    'GateOutcome',
    'HoldLatencyOptions',
    'ImportedFile',
    'Ladder',
    'LadderStep',
    'Lazy',
    'Manifest',
    'MeetSLOOptions',
    'ModelRef',
    'NoiseProfile',
    'PairResult',
    'PairSpec',
    'PairSweepSpec',
    'RequestRecord',
    'ReuseCacheOptions',
    'RunCellOptions',
    'RunRecord',
    'SLO',
    'SimEngineConfig',
    'SimOptions',
    'SimServer',
    'StayWithinAccuracyGapOptions',
    'StopEarly',
    'StoredBaseline',
    'SustainMoreThanOptions',
    'Sweep',
    'SweepResult',
    'WinDecodeOptions',
    'WinPrefillOptions',
    'WinThroughputOptions',
    'WorkloadKind',
    'WorkloadSpec',
  ],
  './vitest': ['ServegateOptions'],
  './reporter': ['BuiltEvidence', 'EvidenceCell', 'GateEntry', 'PairCheck', 'Renderers', 'ServegateReporterOptions'],
  './gates': [
    'AccuracyGapGateOptions',
    'ArmInput',
    'ArmPreemptions',
    'CapacityInput',
    'GateDecision',
    'GateOutcome',
    'GatePair',
    'GateRecord',
    'HoldLatencyGateOptions',
    'HolmGate',
    'LatencyMetric',
    'PreemptionFacts',
    'RateMetric',
    'ReuseCacheGateOptions',
    'ReuseCacheInput',
    'SLOGateOptions',
    'SLORecord',
    'SustainGateOptions',
    'WinGateName',
    'WinGateOptions',
  ],
}

const codeEntries = Object.entries(pkg.exports).filter(
  (e): e is [string, { types: string; import: string; default: string }] => typeof e[1] === 'object',
)

test('every code entry has types and import conditions into dist/, built from an index of src/', () => {
  expect(codeEntries.map(([name]) => name).sort()).toEqual(Object.keys(EXPECTED).sort())
  for (const [, target] of codeEntries) {
    expect(target.import).toMatch(/^\.\/dist\/.+\.js$/)
    expect(target.types).toBe(target.import.replace(/\.js$/, '.d.ts'))
    // A CommonJS project's vitest.config.ts is bundled to CommonJS and require()s the plugin (Node loads ESM through require).
    expect(target.default).toBe(target.import)
  }
  expect(pkg.exports['./schema/run.schema.json']).toBe('./schema/run.schema.json')
  expect(pkg.exports['./schema/evidence.schema.json']).toBe('./schema/evidence.schema.json')
  // docs/client-benchmark.md is a log of measurement runs: kept in the repository, not shipped.
  // The demo's two specs ship as text: servegate demo --sim copies them into the user's project.
  expect(pkg.files.sort()).toEqual([
    '!docs/client-benchmark.md',
    'benchmarks/demo/regression.demo.ts',
    'benchmarks/demo/story.bench.ts',
    'bin',
    'dist',
    'docs',
    'schema',
  ])
})

test.each(Object.keys(EXPECTED))('entry %s exports exactly its pinned names', async (name) => {
  const target = codeEntries.find(([n]) => n === name)?.[1]
  if (target === undefined) throw new Error(`no entry ${name}`)
  const source = target.import.replace(/^\.\/dist\//, './').replace(/\.js$/, '.ts')
  const module = (await import(source)) as Record<string, unknown>
  expect(Object.keys(module).sort()).toEqual([...(EXPECTED[name] ?? [])].sort())
})

/** The names an entry's source exports that are not among its runtime names, read with the TypeScript checker. */
function typeOnlyExports(program: ts.Program, source: string, runtime: readonly string[]): string[] {
  const checker = program.getTypeChecker()
  const file = program.getSourceFile(source)
  const module = file === undefined ? undefined : checker.getSymbolAtLocation(file)
  if (module === undefined) throw new Error(`cannot read the exports of ${source}`)
  return checker
    .getExportsOfModule(module)
    .map((symbol) => symbol.name)
    .filter((name) => !runtime.includes(name))
    .sort()
}

test('each entry exports exactly its pinned type names, and every name follows the naming rule', () => {
  const sources = Object.fromEntries(
    codeEntries.map(([name, target]) => [
      name,
      fileURLToPath(new URL(target.import.replace(/^\.\/dist\//, './').replace(/\.js$/, '.ts'), import.meta.url)),
    ]),
  )
  const program = ts.createProgram(Object.values(sources), {
    allowImportingTsExtensions: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
  })
  const found = Object.fromEntries(
    Object.entries(sources).map(([name, source]) => [name, typeOnlyExports(program, source, EXPECTED[name] ?? [])]),
  )
  expect(found).toEqual(Object.fromEntries(Object.entries(EXPECTED_TYPES).map(([name, list]) => [name, [...list].sort()])))
  const all = Object.values(EXPECTED_TYPES).flat()
  // Nothing resolved or internal in an entry; one casing for SLO; a matcher's options are
  // `<Claim>Options` in `servegate`, a gate's `<Name>GateOptions` in `servegate/gates`.
  expect(all.filter((n) => n.startsWith('Resolved'))).toEqual([])
  expect(all.filter((n) => /Slo(?!t|w)/.test(n))).toEqual([])
  expect((EXPECTED_TYPES['.'] ?? []).filter((n) => n.endsWith('GateOptions') || n.endsWith('MatcherOptions'))).toEqual([])
  expect((EXPECTED_TYPES['./gates'] ?? []).filter((n) => n.endsWith('Options') && !n.endsWith('GateOptions'))).toEqual([])
})

/** Every module a file loads through static imports (type-only imports and `import()` excluded), packages by name. */
async function staticGraph(entry: URL): Promise<{ files: Set<string>; packages: Set<string> }> {
  const files = new Set<string>()
  const packages = new Set<string>()
  const visit = async (url: URL): Promise<void> => {
    if (files.has(url.href)) return
    files.add(url.href)
    const text = await readFile(url, 'utf8')
    for (const m of text.matchAll(/^(?:import|export)\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) {
      const spec = m[1] as string
      if (spec.startsWith('.')) await visit(new URL(spec, url))
      else if (!spec.startsWith('node:'))
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string))
    }
  }
  await visit(entry)
  return { files, packages }
}

test.each([
  ['the setup file every vitest worker loads', './vitest/setup.ts'],
  ['the plugin vitest.config.ts loads', './vitest/plugin.ts'],
  ['the servegate entry', './index.ts'],
])('%s loads neither the chart renderers nor node-llama-cpp until they are needed', async (_what, path) => {
  const { packages } = await staticGraph(new URL(path, import.meta.url))
  for (const heavy of ['vega', 'vega-lite', 'marked', 'node-llama-cpp']) expect([...packages]).not.toContain(heavy)
  expect([...packages].length).toBeGreaterThan(0)
})

test('the setup file loads the matchers without the evidence builder, which their charts load when first drawn', async () => {
  const { files } = await staticGraph(new URL('./vitest/setup.ts', import.meta.url))
  expect(files).toContain(new URL('./matchers/index.ts', import.meta.url).href)
  for (const builder of ['./evidence/build.ts', './evidence/board.ts']) expect(files).not.toContain(new URL(builder, import.meta.url).href)
})

test.each([
  ['the evidence reporter', './evidence/reporter.ts', './schema/task-meta.ts'],
  ['the renderers it loads when it writes', './evidence/renderers.ts', './evidence/charts.ts'],
])('%s, in vitest’s main process, loads schemas and renderers but no worker code', async (_what, path, loaded) => {
  const { files } = await staticGraph(new URL(path, import.meta.url))
  expect(files).toContain(new URL(loaded, import.meta.url).href)
  const worker = ['declare', 'runner', 'client', 'engines', 'matchers', 'vitest', 'worker'].map(
    (dir) => new URL(`./${dir}/`, import.meta.url).href,
  )
  expect([...files].filter((f) => worker.some((dir) => f.startsWith(dir)))).toEqual([])
})
