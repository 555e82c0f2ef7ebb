# Writes OUT with the psbench version (project version + git describe), at build time, so every
# JSON record names the code that produced it. Rewrites OUT only when the text changes.
execute_process(COMMAND git describe --always --dirty --tags
  WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE git OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT git)
  set(git "unknown")
endif()
set(text "#define PSBENCH_VERSION \"${VERSION}+${git}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
