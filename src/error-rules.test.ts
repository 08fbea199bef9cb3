/**
 * Two rules for every error servegate's library code throws (STYLE.md):
 * - no plain `Error`: a `ServegateError` with a stable code (a wrong argument to a pure function
 *   may be a `TypeError` or `RangeError`, as the matchers' and the statistics' are);
 * - an error thrown while handling another keeps it: a `ServegateError` created in a `catch`
 *   block or a `.catch(…)` handler passes `{ cause }`.
 * Walks the sources with the TypeScript parser, so a comment or a string that reads like a throw
 * is not one.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { expect, test } from 'vitest'

const ROOT = new URL('..', import.meta.url).pathname

/** The library's TypeScript sources under src/, tests excluded. */
function sources(): string[] {
  const out: string[] = []
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name)
      if (e.isDirectory()) walk(path)
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts')) out.push(path)
    }
  }
  walk(join(ROOT, 'src'))
  return out.sort()
}

interface Finding {
  where: string
  text: string
}

/** The handler a node sits in: the nearest enclosing catch clause or `.catch(fn)` callback, within the same function. */
function handlerOf(node: ts.Node): ts.CatchClause | ts.FunctionLikeDeclaration | null {
  for (let n: ts.Node | undefined = node.parent; n !== undefined; n = n.parent) {
    if (ts.isCatchClause(n)) return n
    if (ts.isFunctionLike(n)) {
      const call = n.parent
      const isCatchCallback =
        call !== undefined &&
        ts.isCallExpression(call) &&
        ts.isPropertyAccessExpression(call.expression) &&
        call.expression.name.text === 'catch' &&
        call.arguments[0] === n
      return isCatchCallback ? (n as ts.FunctionLikeDeclaration) : null
    }
  }
  return null
}

/** Whether `new ServegateError(code, message, options)` passes a `cause`. */
function passesCause(node: ts.NewExpression): boolean {
  const options = node.arguments?.[2]
  if (options === undefined) return false
  if (!ts.isObjectLiteralExpression(options)) return true // a variable holding the options: taken as given
  return options.properties.some((p) => p.name !== undefined && ts.isIdentifier(p.name) && p.name.text === 'cause')
}

function findings(): { plain: Finding[]; causeless: Finding[] } {
  const plain: Finding[] = []
  const causeless: Finding[] = []
  for (const file of sources()) {
    const text = readFileSync(file, 'utf8')
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
    const visit = (node: ts.Node): void => {
      if (ts.isNewExpression(node) && ts.isIdentifier(node.expression)) {
        const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1
        const found = { where: `${relative(ROOT, file)}:${line}`, text: node.getText(sf).split('\n')[0] as string }
        if (node.expression.text === 'Error') plain.push(found)
        if (node.expression.text === 'ServegateError' && handlerOf(node) !== null && !passesCause(node)) causeless.push(found)
      }
      ts.forEachChild(node, visit)
    }
    visit(sf)
  }
  return { plain, causeless }
}

const found = findings()

test('library code throws no plain Error', () => {
  expect(found.plain).toEqual([])
})

test('a ServegateError made while handling another error passes { cause }', () => {
  expect(found.causeless).toEqual([])
})

test('the walk sees the sources it rules on', () => {
  expect(sources().length).toBeGreaterThan(100)
  expect(sources().some((f) => f.endsWith('src/errors.ts'))).toBe(true)
})
