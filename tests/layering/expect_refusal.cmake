# Runs the layering check on a fixture tree (tests/layering/FIXTURE/src), in which FILE includes
# INCLUDED from a folder above its own, and passes only when the check refuses it with a line naming
# that include. The defaults: the fixture `upward`, whose ops/dispatch.h includes from autograd/.
if(NOT FIXTURE)
  set(FIXTURE upward)
  set(FILE ops/dispatch.h)
  set(INCLUDED autograd/engine.h)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_CURRENT_LIST_DIR}/${FIXTURE}/src
                        -P ${CMAKE_CURRENT_LIST_DIR}/../../cmake/check_layers.cmake
                RESULT_VARIABLE result ERROR_VARIABLE errors OUTPUT_VARIABLE output)
if(result EQUAL 0)
  message(FATAL_ERROR "the layering check accepted an upward include (${FILE} -> ${INCLUDED})")
endif()
string(FIND "${errors}" "layering: ${FILE} includes \"${INCLUDED}\"" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the layering check failed without naming the upward include: ${errors}")
endif()
