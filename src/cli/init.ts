import { mkdir, readFile, stat, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { parseFlags } from './flags.ts'
import {
  CONFIG_IMPORT_LINE,
  CONFIG_PLUGIN_LINE,
  EVIDENCE_DIR,
  GITIGNORE_BEGIN,
  GITIGNORE_END,
  GITIGNORE_LINES,
  SERVING_SPEC,
  SPEC_PATH,
  VITEST_CONFIG,
  VITEST_CONFIG_PATH,
  WORKFLOW,
  WORKFLOW_PATH,
} from './init-templates.ts'
import type { CliIo } from './cli-io.ts'

const INIT_HELP = `servegate init [--dir DIR] [--force]

  Sets up servegate in an existing repository (after npm i -D servegate vitest):
    ${VITEST_CONFIG_PATH.padEnd(32)} the vitest config with the servegate plugin (evidence in ${EVIDENCE_DIR}/);
    ${''.padEnd(32)} vitest.config.mts where package.json is not "type": "module"
    ${SPEC_PATH.padEnd(32)} a baseline-vs-candidate pair: vLLM against your engine with
    ${''.padEnd(32)} SERVEGATE_ENGINES=gpu, the simulated engine otherwise
    ${WORKFLOW_PATH.padEnd(32)} shards on self-hosted GPU runners, merged evidence, one PR comment
    ${'.gitignore'.padEnd(32)} a marked block for ${GITIGNORE_LINES.join(', ')} (only the lines it lacks)
  An existing file is left as it is (reported skipped) unless --force. An existing vitest config
  under another name (vitest.config.mts, a vite.config.* with a test block…) is never touched:
  the lines to add to it are printed.

  --dir DIR   the repository's root (default: the current directory)
  --force     overwrite ${VITEST_CONFIG_PATH}, ${SPEC_PATH} and ${WORKFLOW_PATH} where they exist`

const CONFIG_EXTENSIONS = ['ts', 'mts', 'cts', 'js', 'mjs', 'cjs'] as const

/** What init did with one file. */
type InitOutcome =
  | { path: string; action: 'written' | 'overwritten'; note?: string }
  | { path: string; action: 'skipped'; reason: string }
  | { path: string; action: 'printed'; reason: string; lines: readonly string[] }
  | { path: string; action: 'appended'; lines: readonly string[] }

/** A config file that already configures vitest: its path, and whether it already uses servegate. */
interface ExistingConfig {
  path: string
  usesServegate: boolean
}

async function readIfExists(path: string): Promise<string | null> {
  return readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null
    throw new ServegateError('FILE_INVALID', `${path}: cannot read (${error.code ?? error.message})`, { cause: error })
  })
}

/**
 * The config vitest would load in `dir`, if any: a vitest.config.*, or a vite.config.* with a
 * `test` block. A vite.config.* without one is returned as `shadowed` (vitest.config.ts will take
 * precedence over it).
 */
async function findVitestConfig(dir: string): Promise<{ existing: ExistingConfig | null; shadowed: string | null }> {
  for (const ext of CONFIG_EXTENSIONS) {
    const path = `vitest.config.${ext}`
    const text = await readIfExists(join(dir, path))
    if (text !== null) return { existing: { path, usesServegate: text.includes('servegate/vitest') }, shadowed: null }
  }
  for (const ext of CONFIG_EXTENSIONS) {
    const path = `vite.config.${ext}`
    const text = await readIfExists(join(dir, path))
    if (text === null) continue
    if (/\btest\s*:/.test(text)) return { existing: { path, usesServegate: text.includes('servegate/vitest') }, shadowed: null }
    return { existing: null, shadowed: path }
  }
  return { existing: null, shadowed: null }
}

/** A .gitignore line reduced to what it names: `/evidence/`, `evidence/` and `evidence` are one. */
function ignoredName(line: string): string {
  return line.trim().replace(/^\//, '').replace(/\/$/, '')
}

/**
 * The .gitignore with servegate's lines that `existing` lacks, inside the marked block (added to
 * the block where it is already there); null when nothing is lacking. Running it on its own
 * output gives null: init twice leaves the same file.
 */
export function gitignoreWith(existing: string | null): { text: string; added: string[] } | null {
  const lines = existing === null ? [] : existing.split(/\r?\n/)
  const present = new Set(lines.filter((l) => !l.trim().startsWith('#')).map(ignoredName))
  const added = GITIGNORE_LINES.filter((l) => !present.has(ignoredName(l)))
  if (added.length === 0) return null
  const end = lines.indexOf(GITIGNORE_END)
  if (lines.includes(GITIGNORE_BEGIN) && end > lines.indexOf(GITIGNORE_BEGIN)) {
    return { text: [...lines.slice(0, end), ...added, ...lines.slice(end)].join('\n'), added }
  }
  const before = existing === null || existing === '' ? '' : existing.endsWith('\n') ? `${existing}\n` : `${existing}\n\n`
  return { text: `${before}${[GITIGNORE_BEGIN, ...added, GITIGNORE_END].join('\n')}\n`, added }
}

/** Writes `content` at `path` unless it exists and `force` is off. */
async function writeFresh(dir: string, path: string, content: string, force: boolean): Promise<InitOutcome> {
  const target = join(dir, path)
  const exists = (await readIfExists(target)) !== null
  if (exists && !force) return { path, action: 'skipped', reason: 'exists; pass --force to overwrite' }
  await mkdir(dirname(target), { recursive: true })
  await writeFile(target, content)
  return { path, action: exists ? 'overwritten' : 'written' }
}

/** The repository's package.json, parsed; null when there is none or it is not JSON. */
async function readPackage(dir: string): Promise<{ type?: unknown; dependencies?: unknown; devDependencies?: unknown } | null> {
  const text = await readIfExists(join(dir, 'package.json'))
  if (text === null) return null
  try {
    const value: unknown = JSON.parse(text)
    return value !== null && typeof value === 'object' ? value : null
  } catch {
    return null
  }
}

/**
 * The name of the config init writes: vitest.config.ts in an ES module package, else
 * vitest.config.mts (an ESM config named .ts in a CommonJS package makes Vite warn that its
 * coming native loader will refuse it).
 */
function configPath(pkg: { type?: unknown } | null): { path: string; note?: string } {
  if (pkg?.type === 'module') return { path: VITEST_CONFIG_PATH }
  return { path: 'vitest.config.mts', note: `.mts: package.json ${pkg === null ? 'is missing' : 'is not "type": "module"'}` }
}

/** Configs init may overwrite with --force: the ones it writes. */
const OWN_CONFIGS: readonly string[] = [VITEST_CONFIG_PATH, 'vitest.config.mts']

async function writeConfig(dir: string, force: boolean, pkg: { type?: unknown } | null): Promise<InitOutcome[]> {
  const { existing, shadowed } = await findVitestConfig(dir)
  if (existing !== null && !(force && OWN_CONFIGS.includes(existing.path))) {
    if (existing.usesServegate) return [{ path: existing.path, action: 'skipped', reason: 'already uses servegate/vitest' }]
    const reason = 'configures vitest already and was left as it is; add servegate to it:'
    return [
      {
        path: existing.path,
        action: 'printed',
        reason,
        lines: [CONFIG_IMPORT_LINE, `${CONFIG_PLUGIN_LINE}   // in defineConfig({ ... }), beside its other plugins`],
      },
    ]
  }
  const target = existing === null ? configPath(pkg) : { path: existing.path }
  const written = await writeFresh(dir, target.path, VITEST_CONFIG, force)
  const wrote = written.action === 'written' || written.action === 'overwritten'
  const outcomes: InitOutcome[] = [wrote && target.note !== undefined ? { ...written, note: target.note } : written]
  if (shadowed !== null) {
    const reason =
      `has no test block and was left as it is; vitest now reads ${target.path} instead ` +
      "(wrap its config in vitest's mergeConfig(viteConfig, …) if your tests need its plugins)"
    outcomes.push({ path: shadowed, action: 'printed', reason, lines: [] })
  }
  return outcomes
}

/** What to install first when package.json lacks servegate or vitest; null when it has both. */
function installHint(pkg: { dependencies?: unknown; devDependencies?: unknown } | null): string | null {
  if (pkg === null) return 'no package.json here: run npm init -y, then npm i -D servegate vitest'
  const has = (name: string) =>
    [pkg.dependencies, pkg.devDependencies].some((deps) => deps !== null && typeof deps === 'object' && name in deps)
  const missing = ['servegate', 'vitest'].filter((name) => !has(name))
  return missing.length === 0 ? null : `package.json lacks ${missing.join(' and ')}: run npm i -D ${missing.join(' ')}`
}

async function writeGitignore(dir: string): Promise<InitOutcome> {
  const path = '.gitignore'
  const existing = await readIfExists(join(dir, path))
  const next = gitignoreWith(existing)
  if (next === null) return { path, action: 'skipped', reason: `already ignores ${GITIGNORE_LINES.join(', ')}` }
  await writeFile(join(dir, path), next.text)
  return existing === null ? { path, action: 'written' } : { path, action: 'appended', lines: next.added }
}

/** Sets up servegate in `dir`; never overwrites a file unless `force`. */
async function initProject(dir: string, force: boolean): Promise<InitOutcome[]> {
  return [
    ...(await writeConfig(dir, force, await readPackage(dir))),
    await writeFresh(dir, SPEC_PATH, SERVING_SPEC, force),
    await writeFresh(dir, WORKFLOW_PATH, WORKFLOW, force),
    await writeGitignore(dir),
  ]
}

/** One outcome as the report's lines. */
function outcomeLines(o: InitOutcome): string[] {
  const head = `  ${o.action.padEnd(12)}${o.path}`
  switch (o.action) {
    case 'written':
    case 'overwritten':
      return [o.note === undefined ? head : `${head} (${o.note})`]
    case 'skipped':
      return [`${head} (${o.reason})`]
    case 'appended':
      return [`${head} (${o.lines.join(', ')}, in the servegate block)`]
    case 'printed':
      return [`${head} ${o.reason}`, ...o.lines.map((l) => `${' '.repeat(16)}${l}`)]
  }
}

const NEXT = `
Next
  npx vitest bench --run
      runs ${SPEC_PATH} on servegate's simulated engine (no GPU needed, seconds) and writes ${EVIDENCE_DIR}/
  npx servegate verify ${EVIDENCE_DIR} --require-promotable
      checks every hash and summary of the evidence, and that it is promotable
  SERVEGATE_ENGINES=gpu npx vitest bench --run
      the same pair on this machine's GPU: vLLM (baseline) against your engine (candidate);
      set the candidate's argv and the model in ${SPEC_PATH} first
  ${WORKFLOW_PATH}
      runs the specs in shards on self-hosted runners labelled [self-hosted, linux, gpu], merges
      the evidence, comments the board on each pull request and fails when it is not promotable
      (node_modules/servegate/docs/ci.md)
`

/** `servegate init`: writes the config, the example spec, the workflow and the .gitignore block. */
export async function initCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(
    'init',
    argv,
    { dir: { type: 'string' }, force: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    true,
  )
  if (values.help === true) {
    io.stdout.write(`${INIT_HELP}\n`)
    return 0
  }
  if (positionals.length > 0)
    throw new ServegateError('CONFIG_INVALID', `init takes no arguments, got "${positionals[0]}"; pass the repository as --dir DIR`)
  if (values.dir === '')
    throw new ServegateError('CONFIG_INVALID', '--dir needs a directory; pass --dir DIR, or leave it out for the current directory')
  const dir = resolve(values.dir ?? '.')
  const kind = await stat(dir).catch(() => null)
  if (kind === null || !kind.isDirectory())
    throw new ServegateError('CONFIG_INVALID', `--dir: ${dir} is not a directory; pass an existing repository's root`)
  const outcomes = await initProject(dir, values.force === true)
  io.stdout.write(`servegate init: ${dir}\n${outcomes.flatMap(outcomeLines).join('\n')}\n`)
  const hint = installHint(await readPackage(dir))
  if (hint !== null) io.stdout.write(`\nFirst: ${hint}\n`)
  io.stdout.write(NEXT)
  return 0
}
