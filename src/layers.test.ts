/**
 * The layers hold everywhere, not only at the entries (STYLE.md, "Layout shows the
 * architecture"): every import between two folders of src/ (a root file such as `errors.ts` is a
 * node of its own) is written out in ALLOWED below. A new edge fails naming the file and its
 * import; an allowed edge no source uses any more fails too, so the table stays the graph.
 * Type-only imports count: a type couples the two folders as much as a value does. Test files
 * are left out (a test may build fixtures from any layer).
 */
import { readdir, readFile } from 'node:fs/promises'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, test } from 'vitest'

const SRC = fileURLToPath(new URL('.', import.meta.url))

/** schema/ and the root helpers: they import only each other. */
const BOTTOM = [
  'schema',
  'errors.ts',
  'secrets.ts',
  'version.ts',
  'random.ts',
  'loopback.ts',
  'number-format.ts',
  'node-flags.ts',
  'http-request.ts',
  'http1.ts',
]

/** The parts the runner wires (STYLE.md): independent of each other but for PART_EXCEPTIONS. */
const PARTS = ['workload', 'client', 'metrics', 'stats', 'engines']

/** Code that runs only in a vitest worker or a CLI run, never in the reporter's main process. */
const WORKER_SIDE = [
  'declare',
  'worker',
  'runner',
  'client',
  'engines',
  'workload',
  'load',
  'telemetry',
  'sim',
  'matchers',
  'vitest',
  'cli',
]

/**
 * Edges between parts that the layering tolerates, each with its reason. Any other edge between
 * two parts fails the rules below even when ALLOWED lists it.
 */
const PART_EXCEPTIONS: Record<string, string> = {
  'engines → client':
    'the in-process llama.cpp engine (node-llama-cpp.ts) has no HTTP stream: it is its own transport, and fills the ' +
    'client’s StreamObservation with the client’s clock, digests and content capture',
  'workload → client':
    'type-only: calibration (prepare.ts) takes the engine’s tokenizer, whose interface lives beside its HTTP probe (client/tokenize.ts)',
  'metrics → stats': 'cell metrics put a Wilson interval on the failed share; stats imports nothing in src/, a leaf of pure math',
}

/**
 * Every folder → folder edge of src/, as imported today. Kept exact: add an edge here only with the
 * import that needs it, and check it against the rules below.
 */
const ALLOWED: Record<string, string[]> = {
  // Entries and tools: composition of their own (the CLI builds its Environment from its flags).
  'index.ts': ['declare', 'engines', 'errors.ts', 'load', 'matchers', 'record', 'runner', 'schema', 'sim', 'version.ts', 'workload'],
  vitest: ['declare', 'errors.ts', 'evidence', 'matchers', 'node-flags.ts', 'schema', 'worker'],
  cli: [
    'engines',
    'errors.ts',
    'evidence',
    'gates',
    'load',
    'loopback.ts',
    'metrics',
    'node-flags.ts',
    'number-format.ts',
    'record',
    'runner',
    'schema',
    'sim',
    'version.ts',
    'workload',
  ],
  // Declarations resolve engine handles and options when declared, then hand cells to the worker's runner.
  declare: ['engines', 'errors.ts', 'load', 'runner', 'schema', 'sim', 'worker'],
  // The one composition root.
  runner: [
    'client',
    'engines',
    'errors.ts',
    'gates',
    'http-request.ts',
    'http1.ts',
    'load',
    'loopback.ts',
    'metrics',
    'record',
    'schema',
    'secrets.ts',
    'stats',
    'telemetry',
    'workload',
  ],
  // The worker's file context: the plugin's provided options and the registry of declared cells.
  worker: ['errors.ts', 'schema'],
  // Matchers draw a cell's chart with the evidence renderers (imported when first drawn), and read stored baselines.
  matchers: ['errors.ts', 'evidence', 'gates', 'number-format.ts', 'record', 'schema', 'worker'],
  gates: ['metrics', 'number-format.ts', 'schema', 'stats'],
  // The reporter re-derives decisions (gates) from records (record) and summarizes them (metrics): all pure.
  evidence: ['errors.ts', 'gates', 'metrics', 'number-format.ts', 'record', 'schema', 'secrets.ts', 'version.ts'],
  // A run record file may be another harness's output, converted on read.
  record: ['errors.ts', 'import', 'number-format.ts', 'schema', 'secrets.ts'],
  import: ['errors.ts', 'metrics', 'schema'],
  sim: ['errors.ts', 'random.ts'],
  // GPU samples and engine timings are summarized with the same nearest-rank distribution as requests.
  telemetry: ['errors.ts', 'http-request.ts', 'metrics', 'schema'],
  load: ['errors.ts', 'random.ts', 'schema'],
  engines: ['client', 'errors.ts', 'http-request.ts', 'loopback.ts', 'schema', 'secrets.ts', 'version.ts'],
  client: ['errors.ts', 'http-request.ts', 'http1.ts', 'schema'],
  workload: ['client', 'errors.ts', 'random.ts', 'schema'],
  // The one record assembler (run-assembly.ts) stamps the version and scrubs the secrets.
  metrics: ['errors.ts', 'schema', 'secrets.ts', 'stats', 'version.ts'],
  stats: [],
  schema: ['errors.ts', 'version.ts'],
  'number-format.ts': ['schema'],
  'loopback.ts': ['errors.ts', 'http-request.ts'],
  // The client's V8 flags: the plugin's workers and the re-executed CLI run under the same list.
  'node-flags.ts': ['errors.ts'],
  // The small whole requests off the measured path (probes, scrapes, /tokenize), parsed as the client parses its streams.
  'http-request.ts': ['http1.ts'],
  // The HTTP/1.1 response parser: bytes in, head and body out; no I/O.
  'http1.ts': [],
  'errors.ts': ['secrets.ts'],
  'secrets.ts': [],
  'version.ts': [],
  'random.ts': [],
}

/** One import that crosses from one node to another. */
interface Crossing {
  from: string
  to: string
  /** `src/…:line imports '…'`, for the failure message. */
  where: string
}

/** The node a path under src/ belongs to: its top folder, or the file itself at the root. */
function nodeOf(path: string): string {
  return relative(SRC, path).split(sep)[0] as string
}

async function sourceFiles(dir: string): Promise<string[]> {
  const files: string[] = []
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) files.push(...(await sourceFiles(path)))
    else if (/\.(c|m)?tsx?$/.test(entry.name) && !/\.test(-d)?\.(c|m)?tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts'))
      files.push(path)
  }
  return files
}

/**
 * Every module specifier a file names, with its line and whether only types come through:
 * `import`, `export … from`, `import()` and `import('…').Type`.
 */
function specifiers(file: string, text: string): Array<{ spec: string; line: number; typeOnly: boolean }> {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: Array<{ spec: string; line: number; typeOnly: boolean }> = []
  const add = (node: ts.Node, literal: ts.Node | undefined, typeOnly: boolean): void => {
    if (literal !== undefined && ts.isStringLiteralLike(literal))
      found.push({ spec: literal.text, line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1, typeOnly })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node, node.moduleSpecifier, node.importClause?.isTypeOnly === true)
    else if (ts.isExportDeclaration(node)) add(node, node.moduleSpecifier, node.isTypeOnly)
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node, node.arguments[0], false)
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal, true)
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return found
}

/** Every import in src/ (test files left out) that crosses from one node to another. */
async function crossings(): Promise<Crossing[]> {
  const found: Crossing[] = []
  for (const file of await sourceFiles(SRC)) {
    for (const { spec, line, typeOnly } of specifiers(file, await readFile(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue
      const target = resolve(dirname(file), spec)
      if (relative(SRC, target).startsWith('..')) continue
      const from = nodeOf(file)
      const to = nodeOf(target)
      if (from !== to) found.push({ from, to, where: `src/${relative(SRC, file)}:${line} imports${typeOnly ? ' type' : ''} '${spec}'` })
    }
  }
  return found
}

const graph = await crossings()
const edgeKey = (from: string, to: string): string => `${from} → ${to}`
const allowedEdges = Object.entries(ALLOWED).flatMap(([from, tos]) => tos.map((to) => edgeKey(from, to)))

test('specifiers finds static, re-exported, dynamic and type-position imports, and which bring only types', () => {
  const text = [
    `import { a } from './a.ts'`,
    `import type { B } from '../b.ts'`,
    `export { c } from './c.ts'`,
    `export type { D } from './d.ts'`,
    `const e = await import('./e.ts')`,
    `let f: import('./f.ts').F`,
    `import {\n  g,\n} from 'vitest'`,
  ].join('\n')
  expect(specifiers('x.ts', text).map((s) => `${s.spec}:${s.line}${s.typeOnly ? ':type' : ''}`)).toEqual([
    './a.ts:1',
    '../b.ts:2:type',
    './c.ts:3',
    './d.ts:4:type',
    './e.ts:5',
    './f.ts:6:type',
    'vitest:7',
  ])
})

test('every node of src/ has a row in the table', () => {
  const nodes = new Set(graph.flatMap((c) => [c.from, c.to]))
  expect([...nodes].filter((n) => ALLOWED[n] === undefined)).toEqual([])
})

test('every import between two folders of src/ is an allowed edge', () => {
  const unlisted = graph.filter((c) => !(ALLOWED[c.from] ?? []).includes(c.to)).map((c) => `${edgeKey(c.from, c.to)}: ${c.where}`)
  expect(unlisted).toEqual([])
})

test('every allowed edge is still imported somewhere (drop the ones that are gone)', () => {
  const present = new Set(graph.map((c) => edgeKey(c.from, c.to)))
  expect(allowedEdges.filter((e) => !present.has(e))).toEqual([])
})

describe('the edges keep the layers of STYLE.md', () => {
  /** The table's edges and the imported ones (the same once the tests above pass), each with where it is imported. */
  const edges = new Map<string, { from: string; to: string; where: string }>()
  for (const [from, tos] of Object.entries(ALLOWED)) for (const to of tos) edges.set(edgeKey(from, to), { from, to, where: 'in ALLOWED' })
  for (const c of graph) edges.set(edgeKey(c.from, c.to), c)
  const breaking = (rule: (e: { from: string; to: string }) => boolean): string[] =>
    [...edges.entries()].filter(([, e]) => rule(e)).map(([key, e]) => `${key}: ${e.where}`)

  test('schema/ and the root helpers import nothing above them', () => {
    expect(breaking((e) => BOTTOM.includes(e.from) && !BOTTOM.includes(e.to))).toEqual([])
  })

  test('every root file but the servegate entry is a bottom helper', () => {
    const rootFiles = Object.keys(ALLOWED).filter((node) => node.endsWith('.ts') && node !== 'index.ts')
    expect(rootFiles.filter((file) => !BOTTOM.includes(file))).toEqual([])
  })

  test('the parts import no other part but for the exceptions named, each still in the table', () => {
    expect(breaking((e) => PARTS.includes(e.from) && PARTS.includes(e.to) && PART_EXCEPTIONS[edgeKey(e.from, e.to)] === undefined)).toEqual(
      [],
    )
    expect(Object.keys(PART_EXCEPTIONS).filter((key) => !allowedEdges.includes(key))).toEqual([])
  })

  test('the matchers judge plain data: no declarations, runner, engines, client or other worker code but the file context', () => {
    expect(breaking((e) => e.from === 'matchers' && WORKER_SIDE.includes(e.to) && e.to !== 'worker')).toEqual([])
  })

  test('the gates import no worker-side code', () => {
    expect(breaking((e) => e.from === 'gates' && WORKER_SIDE.includes(e.to))).toEqual([])
  })

  test('the reporter imports no worker-side code', () => {
    expect(breaking((e) => e.from === 'evidence' && WORKER_SIDE.includes(e.to))).toEqual([])
  })

  test('only the declarations, the CLI and the servegate entry reach the composition root', () => {
    expect(breaking((e) => e.to === 'runner' && !['declare', 'cli', 'index.ts'].includes(e.from))).toEqual([])
  })

  test('the worker’s file context sits below the declarations and the matchers: it imports only the bottom', () => {
    expect(breaking((e) => e.from === 'worker' && !BOTTOM.includes(e.to))).toEqual([])
  })

  test('nothing imports an entry or the CLI', () => {
    expect(breaking((e) => ['index.ts', 'vitest', 'cli'].includes(e.to))).toEqual([])
  })

  test('the folders form no cycle', () => {
    const next = new Map<string, string[]>()
    for (const { from, to } of edges.values()) next.set(from, [...(next.get(from) ?? []), to])
    const done = new Set<string>()
    const cycles: string[] = []
    const visit = (node: string, path: string[]): void => {
      if (path.includes(node)) cycles.push([...path.slice(path.indexOf(node)), node].join(' → '))
      else if (!done.has(node)) {
        for (const to of next.get(node) ?? []) visit(to, [...path, node])
        done.add(node)
      }
    }
    for (const node of next.keys()) visit(node, [])
    expect(cycles).toEqual([])
  })
})
