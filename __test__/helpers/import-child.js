'use strict'
// Imports a folder into a store, printing each progress report on a line, so a test can kill it
// part-way: node import-child.js <store> <format> <path>

const { Store } = require('../..')

const [storePath, format, from] = process.argv.slice(2)
const store = Store.open(storePath)
store
  .import({ format, path: from }, { onProgress: (p) => process.stdout.write(`${JSON.stringify(p)}\n`) })
  .then((r) => {
    process.stdout.write(`done ${JSON.stringify(r)}\n`)
    store.close()
  })
