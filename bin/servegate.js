#!/usr/bin/env node
// Plain JS so that an old Node gets a clear message instead of a syntax error on TypeScript.
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 12)) {
  process.stderr.write(`servegate: Node ${process.versions.node} is too old; use Node >= 22.12 (npx servegate uses the project's node@24)\n`)
  process.exit(2)
}
const { main } = await import('../src/cli/main.ts')
process.exitCode = await main(process.argv.slice(2))
