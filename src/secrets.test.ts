import { afterEach, describe, expect, it } from 'vitest'
import { sanitizeMessage } from './errors.ts'
import {
  clearSecrets,
  registerEnvSecrets,
  registeredSecretCount,
  registerSecret,
  scrubDeep,
  scrubSecrets,
  SecretStreamScrubber,
} from './secrets.ts'

const KEY = 'Zq9+pL/x=T&w7~u!'

afterEach(() => clearSecrets())

function forms(value: string): string[] {
  return [value, encodeURIComponent(value), Buffer.from(value).toString('base64'), Buffer.from(value).toString('base64url')]
}

describe('scrubSecrets', () => {
  it('replaces a registered key in its raw, URL-encoded and base64 forms', () => {
    registerSecret(KEY)
    for (const form of forms(KEY)) expect(scrubSecrets(`invalid api key ${form} here`)).toBe('invalid api key [redacted] here')
  })

  it('catches the base64 of a key inside a longer encoded string, at every alignment', () => {
    registerSecret(KEY)
    for (const prefix of ['', 'u', 'us', 'user:']) {
      const encoded = Buffer.from(`${prefix}${KEY}`).toString('base64')
      expect(scrubSecrets(encoded)).toContain('[redacted]')
      // What is left can no longer be decoded into the key.
      expect(Buffer.from(scrubSecrets(encoded).replace('[redacted]', ''), 'base64').toString('latin1')).not.toContain(KEY.slice(3, 12))
    }
  })

  it('leaves text alone when nothing is registered', () => {
    expect(scrubSecrets(`key ${KEY}`)).toBe(`key ${KEY}`)
    expect(registeredSecretCount()).toBe(0)
  })

  it('scrubs a short explicit key of 4 characters and refuses a shorter one', () => {
    expect(registerSecret('abc')).toBe('too-short')
    expect(registerSecret('k3y!')).toBe('registered')
    expect(scrubSecrets('bad k3y! there')).toBe('bad [redacted] there')
  })
})

describe('sanitizeMessage', () => {
  it('scrubs a bare key, and a quote cut short in the middle of one', () => {
    registerSecret(KEY)
    expect(sanitizeMessage(`HTTP 401: invalid api key ${KEY}`)).toBe('HTTP 401: invalid api key [redacted]')
    expect(sanitizeMessage(`malformed data line: ${KEY.slice(0, 9)}`)).toBe('malformed data line: [redacted]')
  })
})

describe('registerEnvSecrets', () => {
  it('takes names that say secret and explicit names, not flags or look-alikes', () => {
    const tooShort = registerEnvSecrets(
      { HF_TOKEN: 'hf_abcdefghijkl', TOKENIZERS_PARALLELISM: 'falsefalse', DEBUG_TOKEN: '1', LICENSE: 'lic-9876', PIN: 'ab' },
      ['LICENSE', 'PIN'],
    )
    expect(tooShort).toEqual(['PIN'])
    expect(scrubSecrets('hf_abcdefghijkl lic-9876 falsefalse 1')).toBe('[redacted] [redacted] falsefalse 1')
  })
})

describe('scrubDeep', () => {
  it('scrubs strings and keys, never numbers or booleans', () => {
    registerSecret('12345678')
    const value = { n: 12345678, ok: true, text: 'echo 12345678', list: ['12345678'], nested: { '12345678': null } }
    expect(scrubDeep(value)).toEqual({
      n: 12345678,
      ok: true,
      text: 'echo [redacted]',
      list: ['[redacted]'],
      nested: { '[redacted]': null },
    })
  })
})

describe('SecretStreamScrubber', () => {
  it('catches a key split across pieces and loses nothing else', () => {
    registerSecret(KEY)
    const text = `line one\nauthorization: Bearer ${KEY}\nline three ${encodeURIComponent(KEY)} end\n`
    for (const size of [1, 3, 7, 1000]) {
      const s = new SecretStreamScrubber()
      let out = ''
      for (let i = 0; i < text.length; i += size) out += s.write(text.slice(i, i + size))
      out += s.end()
      expect(out).toBe('line one\nauthorization: Bearer [redacted]\nline three [redacted] end\n')
    }
  })
})
