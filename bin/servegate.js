#!/usr/bin/env node
// Plain JS so that an old Node gets a clear message instead of a syntax error.
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(
    `servegate: Node ${process.versions.node} is too old; use Node >= 22.19 ` +
      '(or `npm i -D node@24` and add "allowScripts": { "node": true } to package.json, so npx uses Node 24)\n',
  )
  process.exit(2)
}
// A clone of the repository runs its TypeScript sources; the published package ships only dist/.
// startCli re-executes a measuring command under the client's Node flags before it loads the CLI.
const { existsSync } = await import('node:fs')
const sources = new URL('../src/cli/start.ts', import.meta.url)
const { startCli } = await import(existsSync(sources) ? sources.href : '../dist/cli/start.js')
process.exitCode = await startCli(process.argv.slice(2))
