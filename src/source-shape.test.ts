/**
 * How the sources read: no function in src/ runs past MAX_FUNCTION_LINES. A longer one is a
 * closure that holds its state in captured variables (STYLE.md: state in small classes whose
 * methods are the protocol's events), or steps that want names of their own.
 */
import { readdir, readFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { expect, test } from 'vitest'

const MAX_FUNCTION_LINES = 120
const SRC = fileURLToPath(new URL('.', import.meta.url))
const ROOT = join(SRC, '..')

/** A function-like node over the limit: where it is, what it is called, how long it runs. */
interface LongFunction {
  file: string
  line: number
  name: string
  lines: number
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

/** The name a reader finds the function by: its own, its variable's or property's, its class's. */
function functionName(node: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  const own = node.name !== undefined ? node.name.getText(sf) : null
  const parent = node.parent
  const cls = ts.isClassLike(parent) && parent.name !== undefined ? `${parent.name.text}.` : ''
  if (ts.isConstructorDeclaration(node)) return `${cls}constructor`
  if (own !== null) return `${cls}${own}`
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(sf)
  }
  return '(anonymous)'
}

/** Every function in one file longer than `max` lines, counted from its first token to its last. */
function longFunctions(file: string, text: string, max: number): LongFunction[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: LongFunction[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const fn = node as ts.FunctionLikeDeclaration
      const first = sf.getLineAndCharacterOfPosition(fn.getStart(sf)).line
      const last = sf.getLineAndCharacterOfPosition(fn.getEnd()).line
      const lines = last - first + 1
      if (lines > max) found.push({ file, line: first + 1, name: functionName(fn, sf), lines })
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return found
}

test('longFunctions finds a long function by name, its nested ones too, and passes short ones', () => {
  const body = (n: number): string => Array.from({ length: n }, (_, i) => `  const v${i} = ${i}`).join('\n')
  const text = [
    `export function short() {\n${body(3)}\n}`,
    `export function long() {\n${body(5)}\n}`,
    `class Meter {\n  step() {\n${body(5)}\n  }\n}`,
    `const arrow = () => {\n${body(5)}\n}`,
  ].join('\n')
  const found = longFunctions('x.ts', text, 6).map((f) => `${f.name}:${f.lines}`)
  expect(found).toEqual(['long:7', 'Meter.step:7', 'arrow:7'])
})

test(`no function in src/ runs past ${MAX_FUNCTION_LINES} lines`, async () => {
  const long: LongFunction[] = []
  for (const file of await sourceFiles(SRC)) {
    long.push(...longFunctions(relative(ROOT, file), await readFile(file, 'utf8'), MAX_FUNCTION_LINES))
  }
  expect(long.map((f) => `${f.file}:${f.line} ${f.name} (${f.lines} lines)`)).toEqual([])
})
